//! The safety invariants (docs/simulation.md, "Invariants"), as a record of everything the
//! cluster ever persisted, appended, committed and acknowledged.
//!
//! The simulator calls a hook at each point where an invariant can break (a quorum-state write,
//! a log operation, a high watermark, a granted vote, an acknowledged append) and a sweep after
//! every event; the first broken rule becomes a [`Breach`].

use std::collections::{BTreeMap, BTreeSet};

use crate::raft::{Batch, ElectionState, Epoch, NodeId, Offset};

use super::batch::fingerprint;
use super::disk::batch_index_covering;

/// The rules the simulator checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Invariant {
    /// The HW exposed by the leader of the highest epoch never decreases.
    MonotonicHighWatermark,
    /// A node's persisted epoch never decreases; a running node's epoch equals the persisted one.
    MonotonicEpoch,
    /// A HW is only exposed once a majority of voters' durable logs hold the leader's data below it.
    MajorityReachedHighWatermark,
    /// At most one leader per epoch.
    SingleLeader,
    /// Data below any HW is the same on every node and over time.
    ConsistentCommittedData,
    /// A node votes at most once per epoch, across restarts.
    OneVotePerEpoch,
    /// A vote is granted (response sent) only once it is persisted.
    VotePersistedBeforeGranted,
    /// A leader acts as leader only once its leadership is persisted.
    LeadershipPersisted,
    /// Same (offset, epoch) means identical batch and identical prefix.
    LogMatching,
    /// A leader holds every committed batch of earlier epochs.
    LeaderCompleteness,
    /// No node truncates below its own HW.
    NoTruncationBelowHighWatermark,
    /// An acknowledged append is committed at the acknowledged offsets, in every later leader.
    AcknowledgedAppendKept,
    /// A follower's HW never exceeds what a leader exposed, nor its own log end.
    FollowerHighWatermarkBounded,
    /// A node's HW never decreases while it runs.
    MonotonicNodeHighWatermark,
    /// The core reported a local safety violation.
    FatalOutput,
    /// A log operation broke the driver contract (seq order, contiguity, header stamps).
    LogContract,
    /// What a consumer is handed is the committed log from its position on: contiguous, no
    /// gap, no duplicate, never past the high watermark; diverging and out-of-range answers
    /// never cut committed data.
    ConsumerReadCommitted,
    /// A consumer's read is not stale beyond the model (docs/consistency.md): the high
    /// watermark it is answered with is at least the end of every append acknowledged with
    /// acks=-1 before the fetch was sent, and never below one the same consumer was answered
    /// with before (monotonic reads). What the leader lease guarantees.
    ConsumerReadFresh,
    /// Respond / AppendDone / ClientFetchDone / ShutdownComplete not exactly once, or for an
    /// unknown id (a consumer fetch also never left unanswered).
    ExactlyOnceContract,
    /// The core's view of its log differs from the log the driver keeps for it.
    CoreLogView,
    /// An observer took a voter-only role.
    ObserverRole,
    /// RaftCore::new refused the stored state of a cleanly recovered node.
    RestartFailed,
    /// A batch of an idempotent producer is committed once, however often it was retried, and
    /// every acknowledgement of it names the offsets of that one copy (docs/simulation.md,
    /// "The whole replica").
    IdempotentExactlyOnce,
    /// A replica that applied the log past the high watermark at which an offset commit was
    /// acknowledged holds that offset or a later one (docs/simulation.md, "Committed offsets").
    GroupOffsetKept,
    /// No producer id is handed out twice, by one replica or two, across leaders and restarts
    /// (docs/protocol.md, "Idempotent producers").
    ProducerIdGrantedOnce,
    /// A graceful shutdown did not complete within the shutdown timeout (plus slack).
    ShutdownCompletes,
    /// After faults stop, a leader commits the client's appends and every node catches up.
    Liveness,
    /// Answering a pre-vote changed the node's epoch, role, leader, vote, timers or
    /// quorum-state file (docs/protocol.md, "Pre-vote").
    PreVoteChangesNothing,
    /// The disruption scenario: a voter cut off from a healthy leader and healed raised an
    /// epoch or caused an election while the leader kept a majority.
    DisruptedHealthyLeader,
    /// A FetchQuorumRecords request to a node that kept running was not answered within its
    /// MaxWait (capped as the leader caps it) plus a log read (docs/simulation.md, "Liveness
    /// properties").
    FetchAnsweredByDeadline,
    /// After faults stopped, more elections (or epochs raised) than the bound before the
    /// cluster was live again (docs/simulation.md, "Liveness properties").
    ElectionsAfterFaultsBounded,
    /// A replica's log holds two voter records above the committed end (docs/protocol.md,
    /// "Driving the change", rules 1 and 2).
    OneUncommittedVoterRecord,
    /// The voter set a core uses differs from the one its own log implies (the newest voter
    /// record at or above the persisted AppliedOffset, else the persisted set).
    VoterSetFromLog,
    /// A node outside the voter set its log implies is a prospective, a candidate or a leader.
    NonVoterCampaigns,
    /// After faults stopped (every node alive), the reassigner's last target did not become the
    /// committed voter set with nothing in progress.
    ReassignmentCompletes,
}

#[derive(Clone, Debug)]
pub struct Breach {
    pub invariant: Invariant,
    pub detail: String,
}

pub type Checked = Result<(), Breach>;

pub fn breach(invariant: Invariant, detail: String) -> Checked {
    Err(Breach { invariant, detail })
}

/// Records that `node` answered the `kind` request `id` ("append", "consumer fetch"): a second
/// answer to one request breaks the exactly-once contract.
pub(crate) fn answered_once(
    answered: &mut BTreeSet<u64>,
    node: NodeId,
    kind: &str,
    id: u64,
) -> Checked {
    if answered.insert(id) {
        return Ok(());
    }
    breach(
        Invariant::ExactlyOnceContract,
        format!("node {node} answered {kind} {id} twice"),
    )
}

/// Records `value` under `key` the first time; afterwards returns what is recorded there when
/// `value` differs from it. The leaders of epochs, the votes and the batch registry are each
/// written once, and a second, different value is what breaks their invariant.
fn record_once<K: Ord, V: Copy + PartialEq>(
    records: &mut BTreeMap<K, V>,
    key: K,
    value: V,
) -> Option<V> {
    let known = *records.entry(key).or_insert(value);
    (known != value).then_some(known)
}

/// Identity of a batch for comparison across nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct BatchId {
    base: Offset,
    end: Offset,
    epoch: Epoch,
    fingerprint: u64,
}

impl BatchId {
    fn of(b: &Batch) -> Self {
        Self {
            base: b.base_offset,
            end: b.end_offset(),
            epoch: b.epoch,
            fingerprint: fingerprint(&b.bytes),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Registered {
    id: BatchId,
    prev: Option<(Offset, Epoch)>,
}

/// An append the client got a success for.
#[derive(Clone, Copy, Debug)]
pub struct Acked {
    pub value: u64,
    pub base_offset: Offset,
    pub last_offset: Offset,
}

#[derive(Debug, Default)]
pub struct Checker {
    leader_of_epoch: BTreeMap<Epoch, NodeId>,
    votes: BTreeMap<(NodeId, Epoch), NodeId>,
    /// Every batch ever appended anywhere, by (base offset, epoch).
    registry: BTreeMap<(Offset, Epoch), Registered>,
    /// Committed batches, contiguous from offset 0.
    committed: Vec<BatchId>,
    committed_values: BTreeSet<u64>,
    /// For each epoch whose leader exposed a HW: the index of the last batch below it.
    committed_by_epoch: BTreeMap<Epoch, usize>,
    /// The highest HW any leader exposed.
    max_exposed_hw: Offset,
    /// (epoch, hw) of the last observation of the leader of the highest epoch.
    leader_hw: Option<(Epoch, Offset)>,
    /// Client batches: fingerprint -> value.
    client_values: BTreeMap<u64, u64>,
    /// The values of idempotent producers' batches, with the offsets they were first
    /// acknowledged at.
    idempotent_values: BTreeMap<u64, Option<(Offset, Offset)>>,
    /// Every producer id handed out, with the node that handed it out.
    producer_ids: BTreeMap<i64, NodeId>,
    pub acked: Vec<Acked>,
    /// The end of the highest append acknowledged with acks=-1 so far (0: none).
    pub acked_end: Offset,
    /// Set when a node lost its persistent state (docs/simulation.md, "Invariants": rules go off).
    pub state_loss: bool,
    /// Off: skip the two rules that watch the mechanism (MajorityReachedHighWatermark,
    /// VotePersistedBeforeGranted) and judge only by outcomes (lost or diverging data, two
    /// leaders, double votes). Used to see what a durability bug actually breaks.
    pub outcome_only: bool,
}

impl Checker {
    pub fn committed_end(&self) -> Offset {
        self.committed.last().map_or(0, |b| b.end)
    }

    /// `log`'s batches below `start`, if they are exactly the committed log there.
    pub fn committed_prefix(&self, log: &[Batch], start: Offset) -> Option<Vec<Batch>> {
        let count = self.committed.partition_point(|c| c.end <= start);
        let ends_at_start =
            count == 0 && start == 0 || count > 0 && self.committed[count - 1].end == start;
        if !ends_at_start || log.len() < count {
            return None;
        }
        let same = log[..count]
            .iter()
            .zip(&self.committed[..count])
            .all(|(b, c)| BatchId::of(b) == *c);
        same.then(|| log[..count].to_vec())
    }

    pub fn register_client_batch(&mut self, bytes: &[u8], value: u64) {
        let previous = self.client_values.insert(fingerprint(bytes), value);
        assert!(previous.is_none(), "client values are unique");
    }

    /// A batch of an idempotent producer (retries send these same bytes again).
    pub fn register_idempotent_batch(&mut self, bytes: &[u8], value: u64) {
        self.register_client_batch(bytes, value);
        self.idempotent_values.insert(value, None);
    }

    /// `node` acknowledged a (perhaps retried) idempotent batch: as any quorum acknowledgement,
    /// and at the offsets of every earlier acknowledgement of the same batch.
    pub fn on_idempotent_ack(&mut self, node: NodeId, ack: Acked, log: &[Batch]) -> Checked {
        let offsets = (ack.base_offset, ack.last_offset);
        let first = self
            .idempotent_values
            .get_mut(&ack.value)
            .expect("a registered idempotent batch");
        match *first {
            Some(earlier) if earlier != offsets => {
                return breach(
                    Invariant::IdempotentExactlyOnce,
                    format!(
                        "node {node} acknowledged idempotent value {} at {}..={}, acknowledged before at {}..={}",
                        ack.value, offsets.0, offsets.1, earlier.0, earlier.1
                    ),
                )
            }
            Some(_) => {}
            None => *first = Some(offsets),
        }
        self.on_ack(node, ack, log, true)
    }

    /// `node` answered an InitProducerId with `producer_id`.
    pub fn on_producer_id(&mut self, node: NodeId, producer_id: i64) -> Checked {
        match self.producer_ids.insert(producer_id, node) {
            None => Ok(()),
            Some(earlier) => breach(
                Invariant::ProducerIdGrantedOnce,
                format!("node {node} handed out producer id {producer_id}, handed out before by node {earlier}"),
            ),
        }
    }

    /// A node lost its quorum-state file: its earlier votes no longer bind it.
    pub fn forget_votes_of(&mut self, node: NodeId) {
        self.votes.retain(|&(n, _), _| n != node);
        self.state_loss = true;
    }

    fn claim_leader(&mut self, epoch: Epoch, leader: NodeId, by: NodeId) -> Checked {
        match record_once(&mut self.leader_of_epoch, epoch, leader) {
            Some(known) => breach(
                Invariant::SingleLeader,
                format!(
                    "node {by} names leader {leader} for epoch {epoch}, already led by {known}"
                ),
            ),
            None => Ok(()),
        }
    }

    /// A quorum-state write by `node` (`previous` = what was durable before, None if no file).
    pub fn on_persist(
        &mut self,
        node: NodeId,
        previous: Option<&ElectionState>,
        state: &ElectionState,
        epoch_rule: bool,
    ) -> Checked {
        if let Some(prev) = previous {
            if epoch_rule && state.epoch < prev.epoch {
                return breach(
                    Invariant::MonotonicEpoch,
                    format!(
                        "node {node} persisted epoch {} after {}",
                        state.epoch, prev.epoch
                    ),
                );
            }
        }
        if state.voted_id >= 0 {
            if let Some(v) = record_once(&mut self.votes, (node, state.epoch), state.voted_id) {
                return breach(
                    Invariant::OneVotePerEpoch,
                    format!(
                        "node {node} voted for {} in epoch {} after voting for {v}",
                        state.voted_id, state.epoch
                    ),
                );
            }
        }
        if state.leader_id >= 0 {
            self.claim_leader(state.epoch, state.leader_id, node)?;
        }
        Ok(())
    }

    /// `node` sent a granted vote to `candidate` for `epoch`.
    pub fn on_vote_granted(&self, node: NodeId, epoch: Epoch, candidate: NodeId) -> Checked {
        if self.outcome_only {
            return Ok(());
        }
        match self.votes.get(&(node, epoch)) {
            Some(&v) if v == candidate => Ok(()),
            other => breach(
                Invariant::VotePersistedBeforeGranted,
                format!(
                    "node {node} granted its epoch-{epoch} vote to {candidate}; persisted vote: {other:?}"
                ),
            ),
        }
    }

    /// `node` appends `batches` after `prev` (its last batch before the append).
    pub fn on_append(&mut self, node: NodeId, prev: Option<&Batch>, batches: &[Batch]) -> Checked {
        let mut prev_key = prev.map(|b| (b.base_offset, b.epoch));
        for b in batches {
            let id = BatchId::of(b);
            let key = (b.base_offset, b.epoch);
            let registered = Registered { id, prev: prev_key };
            if let Some(reg) = record_once(&mut self.registry, key, registered) {
                return breach(
                    Invariant::LogMatching,
                    format!(
                        "node {node} appends {id:?} after {prev_key:?}; that position already holds {:?} after {:?}",
                        reg.id, reg.prev
                    ),
                );
            }
            prev_key = Some(key);
        }
        Ok(())
    }

    pub fn on_truncate(&self, node: NodeId, offset: Offset, node_hw: Option<Offset>) -> Checked {
        match node_hw {
            Some(hw) if offset < hw => breach(
                Invariant::NoTruncationBelowHighWatermark,
                format!("node {node} truncates to {offset} below its high watermark {hw}"),
            ),
            _ => Ok(()),
        }
    }

    /// The last batch committed by a leader of an epoch before `epoch` (Raft's leader
    /// completeness is about the committing leader's epoch, not the batch's).
    fn last_committed_before(&self, epoch: Epoch) -> Option<&BatchId> {
        let index = self
            .committed_by_epoch
            .range(..epoch)
            .map(|(_, &i)| i)
            .max()?;
        Some(&self.committed[index])
    }

    /// `log` (of a leader of `epoch`) holds every batch committed in earlier epochs; checked
    /// through the last one, log matching does the rest.
    fn holds_committed(&self, epoch: Epoch, log: &[Batch]) -> bool {
        let Some(last) = self.last_committed_before(epoch) else {
            return true;
        };
        batch_index_covering(log, last.base).is_some_and(|i| BatchId::of(&log[i]) == *last)
    }

    pub fn on_became_leader(&mut self, node: NodeId, epoch: Epoch, log: &[Batch]) -> Checked {
        self.claim_leader(epoch, node, node)?;
        if !self.holds_committed(epoch, log) {
            return breach(
                Invariant::LeaderCompleteness,
                format!(
                    "node {node} became leader of epoch {epoch} without committed batch {:?}",
                    self.last_committed_before(epoch)
                ),
            );
        }
        Ok(())
    }

    /// The leader `node` of `epoch` exposes `hw`. `voter_logs` are the voters' durable logs.
    pub fn on_leader_hw(
        &mut self,
        node: NodeId,
        epoch: Epoch,
        hw: Offset,
        log: &[Batch],
        voter_logs: &[&[Batch]],
    ) -> Checked {
        self.check_leader_monotonic(node, epoch, hw)?;
        if !self.holds_committed(epoch, log) {
            return breach(
                Invariant::LeaderCompleteness,
                format!(
                    "leader {node} of epoch {epoch} exposes HW {hw} without committed batch {:?}",
                    self.last_committed_before(epoch)
                ),
            );
        }
        if hw == 0 {
            return Ok(());
        }
        let Some(i) = batch_index_covering(log, hw - 1) else {
            return breach(
                Invariant::FollowerHighWatermarkBounded,
                format!("leader {node} exposes HW {hw} beyond its log end"),
            );
        };
        if !self.state_loss && !self.outcome_only {
            self.check_majority(node, hw, &log[i], voter_logs)?;
        }
        self.max_exposed_hw = self.max_exposed_hw.max(hw);
        self.extend_committed(node, hw, log)?;
        let last = self.committed.partition_point(|c| c.base < hw) - 1;
        let entry = self.committed_by_epoch.entry(epoch).or_insert(last);
        *entry = (*entry).max(last);
        Ok(())
    }

    fn check_leader_monotonic(&mut self, node: NodeId, epoch: Epoch, hw: Offset) -> Checked {
        match self.leader_hw {
            Some((e, _)) if epoch < e => Ok(()), // a stale leader: not "the" leader
            Some((e, h)) if hw < h => breach(
                Invariant::MonotonicHighWatermark,
                format!("leader {node} of epoch {epoch} exposes HW {hw} after {h} (epoch {e})"),
            ),
            _ => {
                self.leader_hw = Some((epoch, hw));
                Ok(())
            }
        }
    }

    /// How many of `voter_logs` hold the batch `at` covering `hw - 1`.
    fn holding(hw: Offset, at: &Batch, voter_logs: &[&[Batch]]) -> usize {
        voter_logs
            .iter()
            .filter(|log| {
                batch_index_covering(log, hw - 1).is_some_and(|j| {
                    log[j].base_offset == at.base_offset && log[j].epoch == at.epoch
                })
            })
            .count()
    }

    /// Does a majority of `voter_logs` hold the batch `at` covering `hw - 1` durably?
    pub fn majority_holds(hw: Offset, at: &Batch, voter_logs: &[&[Batch]]) -> bool {
        Self::holding(hw, at, voter_logs) * 2 > voter_logs.len()
    }

    fn check_majority(
        &self,
        node: NodeId,
        hw: Offset,
        at: &Batch,
        voter_logs: &[&[Batch]],
    ) -> Checked {
        let holding = Self::holding(hw, at, voter_logs);
        if holding * 2 <= voter_logs.len() {
            return breach(
                Invariant::MajorityReachedHighWatermark,
                format!(
                    "leader {node} exposes HW {hw} but only {holding} of {} voters hold batch ({}, epoch {}) durably",
                    voter_logs.len(),
                    at.base_offset,
                    at.epoch
                ),
            );
        }
        Ok(())
    }

    fn extend_committed(&mut self, node: NodeId, hw: Offset, log: &[Batch]) -> Checked {
        while self.committed_end() < hw {
            let end = self.committed_end();
            let Some(i) = batch_index_covering(log, end).filter(|&i| log[i].base_offset == end)
            else {
                return breach(
                    Invariant::ConsistentCommittedData,
                    format!(
                        "leader {node} has no batch starting at committed end {end} below HW {hw}"
                    ),
                );
            };
            let b = &log[i];
            let id = BatchId::of(b);
            if !b.is_control {
                match self.client_values.get(&id.fingerprint) {
                    Some(&value) => {
                        if !self.committed_values.insert(value) {
                            if self.idempotent_values.contains_key(&value) {
                                return breach(
                                    Invariant::IdempotentExactlyOnce,
                                    format!(
                                        "idempotent value {value} committed twice (again at {end})"
                                    ),
                                );
                            }
                            return breach(
                                Invariant::ConsistentCommittedData,
                                format!("client value {value} committed twice (again at {end})"),
                            );
                        }
                    }
                    None => {
                        return breach(
                            Invariant::ConsistentCommittedData,
                            format!("committed data batch at {end} is not one the client sent"),
                        )
                    }
                }
            }
            self.committed.push(id);
        }
        Ok(())
    }

    /// A node's HW as seen now; `verified` is how far its log was already compared.
    pub fn on_node_hw(
        &self,
        node: NodeId,
        hw: Offset,
        log: &[Batch],
        verified: &mut Offset,
    ) -> Checked {
        if hw > self.max_exposed_hw {
            return breach(
                Invariant::FollowerHighWatermarkBounded,
                format!(
                    "node {node} has HW {hw} above any leader's HW ({})",
                    self.max_exposed_hw
                ),
            );
        }
        let log_end = super::disk::end_offset(log);
        if hw > log_end {
            return breach(
                Invariant::FollowerHighWatermarkBounded,
                format!("node {node} has HW {hw} above its log end {log_end}"),
            );
        }
        while *verified < hw {
            let at = *verified;
            let i = batch_index_covering(log, at).filter(|&i| log[i].base_offset == at);
            let c = self.committed.partition_point(|c| c.base < at);
            let ok = match (i, self.committed.get(c)) {
                (Some(i), Some(cb)) => cb.base == at && BatchId::of(&log[i]) == *cb,
                _ => false,
            };
            if !ok {
                return breach(
                    Invariant::ConsistentCommittedData,
                    format!(
                        "node {node} below its HW {hw}: batch at {at} differs from the committed one ({:?})",
                        self.committed.get(c)
                    ),
                );
            }
            *verified = log[i.expect("checked")].end_offset();
        }
        Ok(())
    }

    /// Consumer `consumer` at `position` was handed `batches` by `node` with high watermark
    /// `hw`: they must be the committed batches from `position` on, whole and in order, below
    /// `hw`, and `hw` no higher than what is committed.
    pub fn on_consumed(
        &self,
        consumer: usize,
        node: NodeId,
        position: Offset,
        hw: Offset,
        batches: &[Batch],
    ) -> Checked {
        let bad = |detail: String| {
            breach(
                Invariant::ConsumerReadCommitted,
                format!("node {node} to consumer {consumer} at {position}: {detail}"),
            )
        };
        if hw > self.committed_end() {
            return bad(format!(
                "high watermark {hw} above the committed end {}",
                self.committed_end()
            ));
        }
        let mut at = position;
        for b in batches {
            let c = self.committed.partition_point(|c| c.base < at);
            let expected = self.committed.get(c).filter(|c| c.base == at);
            if expected != Some(&BatchId::of(b)) {
                return bad(format!(
                    "batch at {} (epoch {}) is not the committed batch at {at} ({expected:?})",
                    b.base_offset, b.epoch
                ));
            }
            if b.end_offset() > hw {
                return bad(format!(
                    "batch ending at {} past the high watermark {hw}",
                    b.end_offset()
                ));
            }
            at = b.end_offset();
        }
        Ok(())
    }

    /// The client got a success for `value` at `base..=last` from `node`, whose log is `log`.
    pub fn on_ack(&mut self, node: NodeId, ack: Acked, log: &[Batch], quorum: bool) -> Checked {
        let found = batch_index_covering(log, ack.base_offset).map(|i| &log[i]);
        let holds = found.is_some_and(|b| {
            b.base_offset == ack.base_offset
                && b.end_offset() == ack.last_offset + 1
                && self.client_values.get(&fingerprint(&b.bytes)) == Some(&ack.value)
        });
        if !holds {
            return breach(
                Invariant::AcknowledgedAppendKept,
                format!("node {node} acknowledged value {} at {}..={} but its log holds {found:?} there", ack.value, ack.base_offset, ack.last_offset),
            );
        }
        if quorum {
            if ack.last_offset >= self.max_exposed_hw {
                return breach(
                    Invariant::AcknowledgedAppendKept,
                    format!(
                        "node {node} acknowledged {}..={} before any leader exposed a HW past it ({})",
                        ack.base_offset, ack.last_offset, self.max_exposed_hw
                    ),
                );
            }
            self.acked_end = self.acked_end.max(ack.last_offset + 1);
            self.acked.push(ack);
        }
        Ok(())
    }

    /// A consumer's fetch sent when `acked_end` was the end of the acknowledged appends was
    /// answered by `node` with high watermark `hw`; `seen` is the highest the consumer was
    /// answered with before (docs/consistency.md, "Fetch").
    pub fn on_read_answered(
        &self,
        consumer: usize,
        node: NodeId,
        hw: Offset,
        acked_end: Offset,
        seen: Offset,
    ) -> Checked {
        if hw < acked_end && !self.state_loss {
            return breach(
                Invariant::ConsumerReadFresh,
                format!(
                    "node {node} answered consumer {consumer} with high watermark {hw}, below {acked_end}, the end of an append acknowledged before the fetch was sent (a stale read)"
                ),
            );
        }
        if hw < seen && !self.state_loss {
            return breach(
                Invariant::ConsumerReadFresh,
                format!(
                    "node {node} answered consumer {consumer} with high watermark {hw}, below {seen}, one it was answered with before (reads went backwards)"
                ),
            );
        }
        Ok(())
    }

    /// Every quorum-acknowledged append is committed where it was acknowledged, and in `log`
    /// (a current leader's log).
    pub fn check_acked_in(&self, node: NodeId, log: &[Batch]) -> Checked {
        for ack in &self.acked {
            let in_log = batch_index_covering(log, ack.base_offset).is_some_and(|i| {
                log[i].base_offset == ack.base_offset
                    && self.client_values.get(&fingerprint(&log[i].bytes)) == Some(&ack.value)
            });
            if !in_log {
                return breach(
                    Invariant::AcknowledgedAppendKept,
                    format!(
                        "acknowledged value {} at {} is missing from leader {node}'s log",
                        ack.value, ack.base_offset
                    ),
                );
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn state(epoch: Epoch, leader_id: NodeId, voted_id: NodeId) -> ElectionState {
        ElectionState {
            epoch,
            leader_id,
            voted_id,
            current_voters: vec![0, 1, 2],
            target_voters: None,
            target_force: false,
            applied_offset: 0,
            ..Default::default()
        }
    }

    fn batch(checker: &mut Checker, base: Offset, epoch: Epoch, value: u64) -> Batch {
        let mut bytes = super::super::batch::client_batch(value, 1, 0);
        checker.register_client_batch(&bytes, value);
        bytes[0..8].copy_from_slice(&base.to_be_bytes());
        bytes[12..16].copy_from_slice(&epoch.to_be_bytes());
        Batch {
            base_offset: base,
            epoch,
            record_count: 1,
            is_control: false,
            bytes: Bytes::from(bytes),
        }
    }

    /// A checker that knows two client batches of epoch 1, at offsets 0 and 1 (values 1 and 2):
    /// the checker and the two batches.
    fn two_batches() -> (Checker, Batch, Batch) {
        let mut c = Checker::default();
        let a = batch(&mut c, 0, 1, 1);
        let b = batch(&mut c, 1, 1, 2);
        (c, a, b)
    }

    fn broken(r: Checked) -> Invariant {
        r.expect_err("the rule must break").invariant
    }

    #[test]
    fn a_second_vote_or_a_second_leader_in_an_epoch_breaks() {
        let mut c = Checker::default();
        c.on_persist(0, None, &state(3, -1, 1), true).unwrap();
        c.on_vote_granted(0, 3, 1).unwrap();
        assert_eq!(
            broken(c.on_vote_granted(0, 4, 1)),
            Invariant::VotePersistedBeforeGranted
        );
        let prev = state(3, -1, 1);
        assert_eq!(
            broken(c.on_persist(0, Some(&prev), &state(3, -1, 2), true)),
            Invariant::OneVotePerEpoch
        );
        assert_eq!(
            broken(c.on_persist(0, Some(&prev), &state(2, -1, -1), true)),
            Invariant::MonotonicEpoch
        );
        c.on_persist(1, None, &state(3, 1, -1), true).unwrap();
        assert_eq!(
            broken(c.on_persist(2, None, &state(3, 2, -1), true)),
            Invariant::SingleLeader
        );
    }

    #[test]
    fn a_consumer_is_handed_the_committed_prefix_only() {
        let (mut c, a, b) = two_batches();
        let log = vec![a.clone(), b.clone()];
        let voters: Vec<&[Batch]> = vec![&log, &log, &log];
        c.on_leader_hw(0, 1, 1, &log, &voters).unwrap();
        c.on_consumed(0, 0, 0, 1, std::slice::from_ref(&a)).unwrap();
        c.on_consumed(0, 0, 1, 1, &[]).unwrap();
        let not_committed = [Invariant::ConsumerReadCommitted];
        assert_eq!(
            [broken(c.on_consumed(0, 0, 0, 2, std::slice::from_ref(&a)))],
            not_committed,
            "a HW above the committed end"
        );
        assert_eq!(
            [broken(c.on_consumed(0, 0, 1, 1, std::slice::from_ref(&b)))],
            not_committed,
            "a batch not committed yet"
        );
        c.on_leader_hw(0, 1, 2, &log, &voters).unwrap();
        c.on_consumed(0, 0, 0, 2, &log).unwrap();
        assert_eq!(
            [broken(c.on_consumed(0, 0, 1, 2, &log))],
            not_committed,
            "a gap or a duplicate: not from the position"
        );
        assert_eq!(
            [broken(c.on_consumed(0, 0, 0, 1, &log))],
            not_committed,
            "past the answer's HW"
        );
        let forked = batch(&mut c, 1, 1, 9);
        assert_eq!(
            [broken(c.on_consumed(0, 0, 1, 2, &[forked]))],
            not_committed,
            "not the committed batch"
        );
    }

    #[test]
    fn log_matching_compares_batch_and_predecessor() {
        let (mut c, a, b) = two_batches();
        let other = batch(&mut c, 1, 1, 3);
        c.on_append(0, None, &[a.clone(), b.clone()]).unwrap();
        c.on_append(1, Some(&a), std::slice::from_ref(&b)).unwrap();
        assert_eq!(
            broken(c.on_append(2, Some(&a), &[other])),
            Invariant::LogMatching
        );
        let x = batch(&mut c, 0, 2, 4);
        assert_eq!(
            broken(c.on_append(2, Some(&x), &[b])),
            Invariant::LogMatching
        );
    }

    #[test]
    fn hw_needs_a_durable_majority_and_commits_stay_put() {
        let (mut c, a, b) = two_batches();
        let log = vec![a.clone(), b.clone()];
        let empty: Vec<Batch> = Vec::new();
        let only_a = vec![a.clone()];
        // Only the leader holds offset 1 durably: HW 2 must not be exposed.
        let voters: Vec<&[Batch]> = vec![&log, &only_a, &empty];
        assert_eq!(
            broken(c.on_leader_hw(0, 1, 2, &log, &voters)),
            Invariant::MajorityReachedHighWatermark
        );
        let voters: Vec<&[Batch]> = vec![&log, &log, &empty];
        c.on_leader_hw(0, 1, 2, &log, &voters).unwrap();
        assert_eq!(
            broken(c.on_leader_hw(0, 1, 1, &log, &voters)),
            Invariant::MonotonicHighWatermark
        );
        // A follower whose log differs below its HW.
        let forked = vec![a.clone(), batch(&mut c, 1, 1, 9)];
        let mut verified = 0;
        assert_eq!(
            broken(c.on_node_hw(1, 2, &forked, &mut verified)),
            Invariant::ConsistentCommittedData
        );
        let mut verified = 0;
        c.on_node_hw(1, 2, &log, &mut verified).unwrap();
        assert_eq!(
            broken(c.on_node_hw(1, 3, &log, &mut verified)),
            Invariant::FollowerHighWatermarkBounded
        );
        // A later leader without the committed batch.
        assert_eq!(
            broken(c.on_became_leader(2, 2, &only_a)),
            Invariant::LeaderCompleteness
        );
        assert_eq!(
            broken(c.on_truncate(1, 1, Some(2))),
            Invariant::NoTruncationBelowHighWatermark
        );
        let ack = Acked {
            value: 2,
            base_offset: 1,
            last_offset: 1,
        };
        c.on_ack(0, ack, &log, true).unwrap();
        assert_eq!(
            broken(c.check_acked_in(2, &only_a)),
            Invariant::AcknowledgedAppendKept
        );
    }
}
