//! The replica: the sans-IO machine a node is, around the Raft core (docs/architecture.md,
//! "Layers"). It is stepped with [`Input`]s (the core's inputs and the requests it decides
//! itself) and answers with [`Output`]s (the core's outputs and its own answers), in order,
//! never re-entrantly. It decides what the core leaves to the node: today, idempotent produce
//! ([`producing`]: which client batches are appended, refused or answered as duplicates, and the
//! producer state every replica keeps from its log) and producer ids ([`producer_ids`]: the
//! blocks reserved through the log, InitProducerId answered from them) and when retention runs
//! ([`retention`]: what it may delete, and carrying forward the records that hold it back).
//!
//! The node (net) and the simulator (`sim`) drive the same `Replica`, so every decision here runs
//! under the simulator's seeds (docs/simulation.md, "The whole replica").

pub mod producer_ids;
pub mod producing;
pub mod rebuild;
pub mod retention;
pub mod snapshots;
#[cfg(test)]
mod tests;

use std::collections::VecDeque;

use bytes::Bytes;

use crate::base::{Epoch, NodeId, Offset, TimeMs};
use crate::groups::{Decision, GroupLimits, GroupReply, GroupRequest, Groups};
use crate::producer_ids::{BlockWanted, ProducerIdLedger};
use crate::producer_snapshot::ProducerSnapshot;
use crate::producers::ProducerStates;
use crate::raft::{self, AppendResult, ErrorCode, PlantedBug, RaftCore, Role};

pub use producer_ids::{Grant, ProducerIds};
pub use producing::{Admission, Producing, ProducingCounts};
pub use retention::{RetentionBounds, RetentionOrder, RetentionSchedule};
pub use snapshots::SnapshotSchedule;

/// Everything a replica reacts to.
#[derive(Clone, Debug)]
pub enum Input {
    /// One of the core's inputs (a client's append is checked first: [`producing`]).
    Core(raft::Input),
    /// A client's InitProducerId (authorized, not transactional: the node's checks), answered
    /// exactly once with [`Output::ProducerId`] of the same `request`.
    InitProducerId { request: u64 },
    /// A FetchQuorumRecords of `replica` in `epoch`, from a connection that may speak for it and
    /// of this cluster, carried a wish for a block of producer ids (stepped after the fetch
    /// itself, so that a first fetch has made its observer one the leader tracks).
    ProducerIdsWanted {
        replica: NodeId,
        epoch: Epoch,
        wanted: BlockWanted,
    },
    /// The retention run of [`Output::Retain`] ended: the log starts at `start`; the policy
    /// would have let it start at `wanted` (further when records held it back).
    Retained { start: Offset, wanted: Offset },
    /// A roll could not reuse the oldest segment: retention is held back below `wanted` by a
    /// record the log must keep.
    RetentionHeldBack { wanted: Offset },
    /// A roll reused the oldest segment's file (within the bounds of [`Output::RollBounds`]):
    /// the log now starts at `start`.
    Rolled { start: Offset },
    /// The producer-state snapshot of [`Output::WriteProducerSnapshot`] at `offset` was
    /// written and synced (`ok`), or its write failed.
    ProducerSnapshotWritten { offset: Offset, ok: bool },
    /// A consumer-group request (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
    /// DeleteGroups, OffsetDelete; authorized and checked by the node), answered exactly once
    /// with [`Output::Group`] of the same `request` (docs/protocol.md, "Consumer groups").
    Group { request: u64, ask: GroupRequest },
}

impl From<raft::Input> for Input {
    fn from(input: raft::Input) -> Self {
        Input::Core(input)
    }
}

/// Everything a replica asks its driver to do, in order.
#[derive(Clone, Debug)]
pub enum Output {
    /// One of the core's outputs, or one the replica makes in the core's terms (a refused or
    /// duplicate append's `AppendDone`, an `Alert`).
    Core(raft::Output),
    /// The answer to [`Input::InitProducerId`] `request`: a producer id never handed out before
    /// by any replica, or a retriable error (COORDINATOR_LOAD_IN_PROGRESS).
    ProducerId {
        request: u64,
        result: Result<i64, ErrorCode>,
    },
    /// Apply retention now, within these bounds, and answer with [`Input::Retained`] (one run
    /// at a time).
    Retain(RetentionBounds),
    /// The bounds the writer's rolls apply to the oldest segment between runs changed.
    RollBounds(RetentionBounds),
    /// Write the producer-state snapshot at `offset` (its file, replaced atomically and
    /// synced; docs/storage.md, "The producer-state snapshot"), and answer with
    /// [`Input::ProducerSnapshotWritten`]. One at a time.
    WriteProducerSnapshot { offset: Offset, bytes: Vec<u8> },
    /// The answer to [`Input::Group`] `request`.
    Group { request: u64, reply: GroupReply },
}

/// A Raft core and the decisions of a node around it.
pub struct Replica {
    core: RaftCore,
    producing: Producing,
    producer_ids: ProducerIds,
    retention: RetentionSchedule,
    snapshots: SnapshotSchedule,
    /// A snapshot taken while following a `HighWatermark` output, to go right after it.
    snapshot_due: Option<(Offset, Vec<u8>)>,
    /// The snapshot being written, and the newest one written (or loaded at start, or received
    /// with a reset): the latter goes to a fetcher told to reset its log to the log start
    /// (docs/protocol.md, "Retention and the log start").
    writing_snapshot: Option<(Offset, Bytes)>,
    shared_snapshot: Option<(Offset, Bytes)>,
    /// The leader's snapshot that came with the fetch answer being stepped, for the reset the
    /// core makes of it (taken or dropped within that step).
    reset_state: Option<(ProducerSnapshot, Bytes)>,
    /// The time of the last `Tick` (the core's clock).
    now: TimeMs,
    /// Inputs for the core the replica itself made while following the core's outputs
    /// (`RefreshFetch`, a block record's `AppendControl`): stepped after the current list.
    internal: VecDeque<raft::Input>,
    /// The core's outputs of the step being carried over (kept to reuse its allocation).
    core_out: Vec<raft::Output>,
    /// Answers the replica adds after one core output (kept to reuse their allocations).
    answers: Vec<producing::Answer>,
    id_answers: Vec<producer_ids::IdAnswer>,
    /// The group coordinator (leading) and every replica's committed offsets.
    groups: Groups,
    group_replies: Vec<(u64, GroupReply)>,
    planted: Option<PlantedBug>,
}

impl Replica {
    /// A replica around `core`, with the producer state and the producer-id ledger its log
    /// implies (rebuilt by the driver from the log, or a snapshot and the log after it).
    pub fn new(core: RaftCore, producers: ProducerStates, ledger: ProducerIdLedger) -> Self {
        let planted = core.config.planted;
        Self {
            core,
            producing: Producing::new(producers),
            producer_ids: ProducerIds::new(ledger),
            retention: RetentionSchedule::new(None),
            snapshots: SnapshotSchedule::new(snapshots::MAX_SNAPSHOT_EVERY_BYTES, None),
            snapshot_due: None,
            writing_snapshot: None,
            shared_snapshot: None,
            reset_state: None,
            now: 0,
            internal: VecDeque::new(),
            core_out: Vec::new(),
            answers: Vec::new(),
            id_answers: Vec::new(),
            groups: Groups::new(GroupLimits::default(), String::new()),
            group_replies: Vec::new(),
            planted,
        }
    }

    /// With this group coordinator (its limits, its member-id prefix, the offsets the driver
    /// rebuilt from the log).
    pub fn with_groups(mut self, groups: Groups) -> Self {
        self.groups = groups;
        self
    }

    pub fn groups(&self) -> &Groups {
        &self.groups
    }

    /// Whether this replica coordinates groups now: the leader, once its epoch's first record
    /// committed (then every offset record below it is committed and applied here); else
    /// NOT_COORDINATOR, or COORDINATOR_LOAD_IN_PROGRESS on a leader still loading.
    pub fn coordinator_status(&self) -> Result<(), ErrorCode> {
        if self.core.role() != Role::Leader {
            return Err(ErrorCode::NOT_COORDINATOR);
        }
        if self.core.high_watermark().is_none() {
            return Err(ErrorCode::COORDINATOR_LOAD_IN_PROGRESS);
        }
        // Its lease ran out: a newer leader may coordinate (docs/consistency.md).
        if !self.core.leads_for_clients() {
            return Err(ErrorCode::NOT_COORDINATOR);
        }
        Ok(())
    }

    /// Runs retention every `interval` ms (`log.retention.check.interval.ms`); without it (a
    /// policy that keeps everything) retention never runs.
    pub fn with_retention(mut self, interval: TimeMs) -> Self {
        self.retention = RetentionSchedule::new(Some(interval));
        self
    }

    /// Takes producer-state snapshots every `segment_bytes` of log (at most
    /// [`snapshots::MAX_SNAPSHOT_EVERY_BYTES`]), having started from the one at `loaded` (its
    /// offset and its file's bytes; None: the driver read the whole log).
    pub fn with_snapshots(mut self, segment_bytes: u64, loaded: Option<(Offset, Bytes)>) -> Self {
        self.snapshots = SnapshotSchedule::new(segment_bytes, loaded.as_ref().map(|(o, _)| *o));
        self.shared_snapshot = loaded;
        self
    }

    pub fn snapshots(&self) -> &SnapshotSchedule {
        &self.snapshots
    }

    /// When the replica next needs a tick: the core's next deadline, or a retention run.
    pub fn next_deadline(&self) -> Option<TimeMs> {
        [
            self.core.next_deadline(),
            self.retention.next_deadline(),
            self.groups.next_deadline(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    pub fn retention(&self) -> &RetentionSchedule {
        &self.retention
    }

    /// The core, for read-only queries (role, offsets, the answers to ListOffsets, ...).
    pub fn core(&self) -> &RaftCore {
        &self.core
    }

    pub fn producing(&self) -> &Producing {
        &self.producing
    }

    pub fn producer_ids(&self) -> &ProducerIds {
        &self.producer_ids
    }

    /// The newest offset retention may delete up to: the core's limit (the high watermark and
    /// the newest committed voter record), the newest committed producer-id block record (a
    /// replica that starts from the log start learns from it where ids are free) and the
    /// newest written producer-state snapshot (a start uses it only while it is above the log
    /// start); never below the log start.
    pub fn retention_limit(&self) -> Offset {
        let start = self.core.log_start_offset();
        let mut limit = self.core.retention_limit();
        if let Some(block) = self.producer_ids.newest_committed_record() {
            limit = limit.min(block);
        }
        if self.planted != Some(PlantedBug::RetentionPassesSnapshot) {
            limit = limit.min(self.snapshots.retention_limit(start));
        }
        limit.max(start)
    }

    /// The bounds a retention run or a roll gets: [`Self::retention_limit`], and the offset
    /// below which records are committed and no longer pin anything (the high watermark, or
    /// the log start before one is known).
    pub fn retention_bounds(&self) -> RetentionBounds {
        let start = self.core.log_start_offset();
        let unpinned = self.core.high_watermark().unwrap_or(start).max(start);
        let limit = self.retention_limit();
        assert!(
            start <= limit && limit <= unpinned,
            "retention bounds out of order: start {start}, limit {limit}, unpinned {unpinned}"
        );
        RetentionBounds { limit, unpinned }
    }

    /// Steps the replica with `input`; its outputs are appended to `out`, to be carried out in
    /// order. An output of the core is followed at once by the answers it makes due (a
    /// duplicate answered when the high watermark passes its original), so the driver sees
    /// them in the order the replica decided them; inputs the replica makes for the core are
    /// stepped after the current list, as a driver's would be.
    pub fn step(&mut self, input: impl Into<Input>, out: &mut Vec<Output>) {
        let first = match input.into() {
            Input::Core(input) => self.accept(input, out),
            Input::InitProducerId { request } => {
                if let Some(result) = self.producer_ids.init(request, self.now) {
                    out.push(Output::ProducerId { request, result });
                }
                self.reserve_producer_ids(out);
                None
            }
            Input::ProducerIdsWanted {
                replica,
                epoch,
                wanted,
            } => {
                self.producer_ids_wanted(replica, epoch, wanted, out);
                None
            }
            Input::Retained { start, wanted } => {
                let bounds = self.retention.finished();
                let before = self.core.log_start_offset();
                assert!(
                    start <= bounds.limit.max(before),
                    "retention moved the log start to {start}, past its limit {}",
                    bounds.limit
                );
                if wanted > self.snapshots.retention_limit(start) {
                    self.snapshots.want();
                }
                if start > before {
                    self.step_core(raft::Input::LogStartMoved { start }, out);
                }
                if wanted > start {
                    self.carry_pinned_records(wanted, out);
                }
                None
            }
            Input::Rolled { start } => {
                let before = self.core.log_start_offset();
                let limit = self.retention.roll_limit_sent();
                assert!(
                    start <= limit.max(before),
                    "a roll moved the log start to {start}, past every limit it was given \
                     ({limit})"
                );
                // A report that crossed a reset, or a repeat, moves nothing.
                if start > before {
                    self.step_core(raft::Input::LogStartMoved { start }, out);
                }
                None
            }
            Input::RetentionHeldBack { wanted } => {
                if wanted > self.snapshots.retention_limit(self.core.log_start_offset()) {
                    self.snapshots.want();
                }
                self.carry_pinned_records(wanted, out);
                None
            }
            Input::ProducerSnapshotWritten { offset, ok } => {
                self.snapshots.finished(offset, ok);
                let written = self.writing_snapshot.take();
                if ok {
                    assert_eq!(written.as_ref().map(|(o, _)| *o), Some(offset));
                    self.shared_snapshot = written;
                }
                None
            }
            Input::Group { request, ask } => {
                self.group_request(request, ask, out);
                None
            }
        };
        if let Some(input) = first {
            self.step_core(input, out);
        }
        // Bounded: each internal input is a reaction to an output, and a reaction to its own
        // outputs is refused by the same checks (one grant per interval, one refresh per wish).
        let mut rounds = 0;
        while let Some(input) = self.internal.pop_front() {
            rounds += 1;
            assert!(rounds <= 64, "the replica keeps stepping its own inputs");
            self.step_core(input, out);
        }
    }

    /// A core input as the replica takes it: a client append is admitted first (None: answered
    /// without the core).
    fn accept(&mut self, input: raft::Input, out: &mut Vec<Output>) -> Option<raft::Input> {
        match input {
            raft::Input::ClientAppend {
                id,
                batch,
                record_count,
                acks,
            } => match self.admit(&batch) {
                Admission::Append => Some(raft::Input::ClientAppend {
                    id,
                    batch,
                    record_count,
                    acks,
                }),
                refused_or_duplicate => {
                    self.answer_without_core(id, refused_or_duplicate, acks, out);
                    None
                }
            },
            raft::Input::Shutdown => {
                self.retention.stop();
                Some(raft::Input::Shutdown)
            }
            raft::Input::Response {
                from,
                correlation,
                response: raft::Response::FetchQuorumRecords(mut r),
            } => {
                if let Some(bytes) = r.producer_state.take() {
                    self.stash_reset_state(from, bytes, out);
                }
                Some(raft::Input::Response {
                    from,
                    correlation,
                    response: raft::Response::FetchQuorumRecords(r),
                })
            }
            raft::Input::Tick { now } => {
                assert!(
                    now >= self.now,
                    "time never goes back: {now} after {}",
                    self.now
                );
                self.now = now;
                Some(raft::Input::Tick { now })
            }
            other => Some(other),
        }
    }

    fn step_core(&mut self, input: raft::Input, out: &mut Vec<Output>) {
        let ticked = matches!(input, raft::Input::Tick { .. });
        let mut core_out = std::mem::take(&mut self.core_out);
        debug_assert!(core_out.is_empty());
        self.core.step(input, &mut core_out);
        for mut output in core_out.drain(..) {
            self.share_snapshot(&mut output);
            self.follow(&output);
            out.push(Output::Core(output));
            for (id, result) in self.answers.drain(..) {
                out.push(Output::Core(raft::Output::AppendDone { id, result }));
            }
            for (request, result) in self.id_answers.drain(..) {
                out.push(Output::ProducerId { request, result });
            }
            self.push_group_replies(out);
            self.push_snapshot_due(out);
        }
        self.core_out = core_out;
        // Used by the reset of this step, or of no use.
        self.reset_state = None;
        if ticked {
            // A snapshot retention waits for, on a log the high watermark no longer moves on.
            if let Some(hw) = self.core.high_watermark() {
                self.maybe_snapshot(hw);
            }
            self.push_snapshot_due(out);
            // Requests past their deadline, and a wish to send (once per wish).
            self.producer_ids.tend(self.now, &mut self.id_answers);
            for (request, result) in self.id_answers.drain(..) {
                out.push(Output::ProducerId { request, result });
            }
            self.reserve_producer_ids(out);
            if self.core.role() == Role::Leader {
                self.groups.tick(self.now, &mut self.group_replies);
                self.push_group_replies(out);
                self.expire_group_offsets(out);
            }
            let bounds = self.retention_bounds();
            for order in self.retention.tend(self.now, bounds).into_iter().flatten() {
                out.push(match order {
                    RetentionOrder::Run(bounds) => Output::Retain(bounds),
                    RetentionOrder::RollBounds(bounds) => Output::RollBounds(bounds),
                });
            }
        }
    }

    fn push_group_replies(&mut self, out: &mut Vec<Output>) {
        for (request, reply) in self.group_replies.drain(..) {
            out.push(Output::Group { request, reply });
        }
    }

    /// A consumer-group request: decided by the coordinator when this replica is one; an
    /// offset record it writes is appended here (directly, so its offset is known) and
    /// answered when it commits (docs/protocol.md, "Consumer groups").
    fn group_request(&mut self, request: u64, ask: GroupRequest, out: &mut Vec<Output>) {
        if let Err(error) = self.coordinator_status() {
            let reply = match ask {
                GroupRequest::Join(_) => GroupReply::Membership(crate::groups::GroupAnswer::Join(
                    crate::groups::JoinAnswer::failed(error),
                )),
                GroupRequest::Sync(_) => {
                    GroupReply::Membership(crate::groups::GroupAnswer::Sync(Err(error)))
                }
                GroupRequest::Heartbeat(_) => {
                    GroupReply::Membership(crate::groups::GroupAnswer::Heartbeat(error))
                }
                GroupRequest::Leave { .. } => {
                    GroupReply::Membership(crate::groups::GroupAnswer::Leave(Err(error)))
                }
                GroupRequest::Commit { .. }
                | GroupRequest::Delete { .. }
                | GroupRequest::DeleteOffsets { .. } => GroupReply::Written(error),
            };
            out.push(Output::Group { request, reply });
            return;
        }
        let timestamp_ms = self.core.wall_clock_ms().unwrap_or(0);
        let decision = self.groups.decide(
            request,
            ask,
            self.now,
            timestamp_ms,
            &mut self.group_replies,
        );
        self.push_group_replies(out);
        match decision {
            None => {}
            Some(Decision::Answer(reply)) => out.push(Output::Group { request, reply }),
            Some(Decision::Append(record)) => {
                match self.append_group_record(&record, timestamp_ms, out) {
                    Some(at) => self.groups.appended(request, at),
                    // Refused (the bound on bytes not yet durable, a full disk, a handover):
                    // the client retries.
                    None => out.push(Output::Group {
                        request,
                        reply: GroupReply::Written(ErrorCode::REQUEST_TIMED_OUT),
                    }),
                }
            }
        }
    }

    /// Appends a group offsets record through the core (directly, so its offset is known):
    /// its offset, or None when the core refused it.
    fn append_group_record(
        &mut self,
        record: &crate::groups::GroupOffsetsRecord,
        timestamp_ms: i64,
        out: &mut Vec<Output>,
    ) -> Option<Offset> {
        let at = self.core.log_end_offset();
        self.step_core(
            raft::Input::AppendControl {
                batch: record.to_batch(0, 0, timestamp_ms),
            },
            out,
        );
        (self.core.log_end_offset() > at).then_some(at)
    }

    /// On the coordinator, when a check is due: the records that expire idle groups' offsets
    /// (`crate::groups::expiry`). One the core refuses is decided again at the next check.
    fn expire_group_offsets(&mut self, out: &mut Vec<Output>) {
        if self.coordinator_status().is_err() {
            return;
        }
        let Some(wall_ms) = self.core.wall_clock_ms() else {
            return;
        };
        for record in self.groups.expire(self.now, wall_ms) {
            if self.append_group_record(&record, wall_ms, out).is_none() {
                break;
            }
        }
    }

    /// Hands the snapshot taken while following an output (or a tick) to the driver.
    fn push_snapshot_due(&mut self, out: &mut Vec<Output>) {
        if let Some((offset, bytes)) = self.snapshot_due.take() {
            out.push(Output::WriteProducerSnapshot { offset, bytes });
        }
    }

    /// Retention is held back below `wanted` by a record the log must keep: the leader carries
    /// the newest committed voter record and producer-id block record forward, so that the
    /// next run, or the next roll, can go further (docs/protocol.md, "Retention and the log
    /// start"). Elsewhere nothing happens.
    fn carry_pinned_records(&mut self, wanted: Offset, out: &mut Vec<Output>) {
        self.step_core(raft::Input::CarryVoterRecord { below: wanted }, out);
        if self.core.role() == Role::Leader {
            if let Some(block) = self.producer_ids.carry_wanted(wanted) {
                let own = self.core.node_id();
                self.grant_producer_ids(own, block, out);
            }
        }
    }

    /// Takes the producer-state snapshot at `hw` if one is due and can be taken there (it
    /// waits in `snapshot_due` for the driver).
    fn maybe_snapshot(&mut self, hw: Offset) {
        let start = self.core.log_start_offset();
        if self.snapshot_due.is_none() && self.snapshots.due(hw, start, self.now) {
            if let Some(bytes) = self.producer_snapshot(hw, self.core.durable_end_offset()) {
                self.snapshots.handed_over(hw, self.now);
                self.writing_snapshot = Some((hw, Bytes::copy_from_slice(&bytes)));
                self.snapshot_due = Some((hw, bytes));
            }
        }
    }

    /// The producer-state snapshot's bytes at `hw`, when the producer state and the blocks are
    /// both committed exactly there and the log holds the batch below it, durably (up to
    /// `durable_end`; a crash
    /// that cut the log below the snapshot would make a start refuse it). One pass over the
    /// state (docs/benchmarks.md, "Producer-state snapshot").
    fn producer_snapshot(&self, hw: Offset, durable_end: Offset) -> Option<Vec<u8>> {
        let producers = self.producing.producers();
        if hw <= self.core.log_start_offset() || hw > durable_end || producers.committed() != hw {
            return None;
        }
        let offsets = self.groups.offsets();
        if offsets.committed_to() != hw {
            return None;
        }
        let epoch = self.core.log_epoch_at(hw - 1)?;
        // Taken (copied, sorted) only once the cheap checks pass.
        let blocks = self.producer_ids.committed_blocks();
        if blocks.committed_to != hw {
            return None;
        }
        // Offsets past the section's bounds are not snapshotted: retention then stays below
        // the last snapshot, and keeps their records (docs/storage.md, "Committed offsets").
        crate::producer_snapshot::encode_parts(
            hw,
            epoch,
            &blocks,
            producers.committed_batches(),
            offsets
                .entries()
                .map(|(g, (t, p), c)| (g, (t.as_str(), *p), c)),
        )
        .ok()
    }

    /// At a graceful shutdown, once the driver's writer has stopped with the log durable up to
    /// `durable_end` (it may be past what the core was told): a last snapshot at the high
    /// watermark (if it moved past the last one), so that the next start replays only what it
    /// must. The driver writes it after the one being written, if any, before it exits, and
    /// need not answer.
    pub fn final_producer_snapshot(&mut self, durable_end: Offset) -> Option<(Offset, Vec<u8>)> {
        let hw = self.core.high_watermark()?;
        if hw <= self.snapshots.last_offset() {
            return None;
        }
        let bytes = self.producer_snapshot(hw, durable_end.min(self.core.log_end_offset()))?;
        self.snapshots.last_handed_over(hw);
        Some((hw, bytes))
    }

    /// A fetch answer from `from` carried the leader's producer-state snapshot (with its log
    /// start): kept for the reset the core makes of the answer in this step, if it fits one.
    /// Bytes that do not decode are reported and dropped (the reset then goes on without them).
    fn stash_reset_state(&mut self, from: NodeId, bytes: Bytes, out: &mut Vec<Output>) {
        match ProducerSnapshot::decode(&bytes) {
            Ok(snapshot) => self.reset_state = Some((snapshot, bytes)),
            Err(e) => out.push(Output::Core(raft::Output::Alert(format!(
                "the producer-state snapshot node {from} sent with its log start is not used \
                 ({e}): producers whose batches it deleted are unknown here"
            )))),
        }
    }

    /// On the leader, a fetch answered with the log start (the fetcher's log ends behind it)
    /// carries the newest snapshot this replica has, so that the fetcher knows the producers
    /// whose batches were deleted (docs/protocol.md, "Retention and the log start").
    fn share_snapshot(&self, output: &mut raft::Output) {
        let raft::Output::Respond {
            response: raft::Response::FetchQuorumRecords(r),
            ..
        } = output
        else {
            return;
        };
        let (Some(start), Some((offset, bytes))) = (r.log_start, &self.shared_snapshot) else {
            return;
        };
        // Retention stays below the newest written snapshot, so it is above the log start; one
        // that is not (loaded at a start since passed) would not fit the fetcher's reset.
        if *offset > start.offset {
            r.producer_state = Some(bytes.clone());
        }
    }

    /// The core reset the log to `start`: with the leader's snapshot above it, that is the
    /// producer state and the committed blocks from now on, and the batches below its offset
    /// (fetched next) are not fed again. True when it was used.
    fn restore_at_reset(&mut self, start: Offset) -> bool {
        let Some((snapshot, bytes)) = self.reset_state.take() else {
            return false;
        };
        if snapshot.offset <= start {
            return false;
        }
        let offset = snapshot.offset;
        self.producing.restore(offset, snapshot.producers);
        self.producer_ids.restore(offset, snapshot.blocks);
        // A version 1 snapshot did not keep the offsets: this replica then learns only those
        // committed in the records it fetches (docs/storage.md, "Committed offsets").
        if let Some(groups) = snapshot.groups {
            self.groups.restore(offset, groups);
        }
        // Written to this replica's own file at once (a start uses it once the log reaches
        // its offset), or, while another is being written, taken again past it soon.
        if self.snapshot_due.is_none() && self.snapshots.can_hand_over(offset) {
            self.snapshots.handed_over(offset, self.now);
            self.writing_snapshot = Some((offset, bytes.clone()));
            self.snapshot_due = Some((offset, bytes.to_vec()));
        } else {
            self.snapshots.restored(offset);
        }
        self.shared_snapshot = Some((offset, bytes));
        true
    }

    fn admit(&mut self, batch: &[u8]) -> Admission {
        let admission = producing::admit(self.producing.producers(), self.core.role(), batch);
        let admission = match admission {
            // The planted bug (docs/simulation.md, "Planted bugs"): a retry appended again.
            Admission::Duplicate { .. } if self.planted == Some(PlantedBug::DuplicateAppended) => {
                Admission::Append
            }
            other => other,
        };
        self.producing.count(admission);
        admission
    }

    /// A client batch the core never sees: refused, or a duplicate (answered now or once its
    /// original commits). With acks=0 nothing is answered (the client reads no response).
    fn answer_without_core(
        &mut self,
        id: u64,
        admission: Admission,
        acks: raft::Acks,
        out: &mut Vec<Output>,
    ) {
        let result = match admission {
            Admission::Refuse(error) => Some(self.failed(error)),
            Admission::Duplicate {
                base_offset,
                last_offset,
            } if acks != raft::Acks::None => {
                let hw = match self.planted {
                    // The planted bug: answered as if already committed.
                    Some(PlantedBug::DuplicateAnsweredEarly) => Some(last_offset + 1),
                    _ => self.core.high_watermark(),
                };
                self.producing.duplicate(id, base_offset, last_offset, hw)
            }
            Admission::Duplicate { .. } => None,
            Admission::Append => unreachable!("appends go to the core"),
        };
        if let Some(result) = result {
            out.push(Output::Core(raft::Output::AppendDone { id, result }));
        }
    }

    /// A failed answer naming the leader this replica knows, as the core's own refusals do.
    fn failed(&self, error: ErrorCode) -> AppendResult {
        AppendResult::Failed {
            error,
            leader_id: self.core.leader_id().unwrap_or(-1),
            leader_epoch: self.core.epoch(),
        }
    }

    /// On the leader, reserves a block for itself when it needs one. Elsewhere the need rides
    /// the replica's fetches (the driver reads [`ProducerIds::wanted`] into each): a fresh one
    /// is sent at once rather than after the one parked at the leader (up to its MaxWait),
    /// once per wish.
    fn reserve_producer_ids(&mut self, out: &mut Vec<Output>) {
        let Some(wanted) = self.producer_ids.wanted() else {
            return;
        };
        if self.core.role() == Role::Leader {
            let own = self.core.node_id();
            self.grant_producer_ids(own, wanted, out);
        } else if self.producer_ids.refresh_for_wish() {
            self.internal.push_back(raft::Input::RefreshFetch);
        }
    }

    /// A replica's fetch asked for producer ids: granted if it is a voter or an observer the
    /// leader tracks (so made-up replica ids cannot fill the log with blocks), in this epoch.
    fn producer_ids_wanted(
        &mut self,
        replica: NodeId,
        epoch: Epoch,
        wanted: BlockWanted,
        out: &mut Vec<Output>,
    ) {
        let core = &self.core;
        let known = core.voters().contains(&replica)
            || core
                .replica_view()
                .is_some_and(|view| view.observers.contains(&replica));
        if known && epoch == core.epoch() && core.role() == Role::Leader {
            self.grant_producer_ids(replica, wanted, out);
        }
    }

    /// On the leader: appends a block for `node` unless one is on its way to it.
    fn grant_producer_ids(&mut self, node: NodeId, wanted: BlockWanted, out: &mut Vec<Output>) {
        debug_assert_eq!(self.core.role(), Role::Leader);
        match self.producer_ids.grant(node, wanted, self.now) {
            Grant::Append(mut block) => {
                if self.planted == Some(PlantedBug::ProducerIdBlockOverlaps) {
                    block.first_id = self.producer_ids.committed_blocks().committed_end;
                }
                let timestamp_ms = self.core.wall_clock_ms().unwrap_or(0);
                self.internal.push_back(raft::Input::AppendControl {
                    batch: block.to_batch(0, 0, timestamp_ms),
                });
            }
            Grant::NotNow => {}
            Grant::Exhausted => out.push(Output::Core(raft::Output::Alert(format!(
                "every producer id was reserved; node {node} gets no more: InitProducerId fails \
                 there from now on; move idempotent producers to a new cluster"
            )))),
        }
    }

    /// What one core output means for the replica's own state; the answers it makes due wait
    /// in `self.answers` and `self.id_answers` for the driver, right after that output.
    fn follow(&mut self, output: &raft::Output) {
        use raft::Output as O;
        let gone = self.failed(ErrorCode::NOT_LEADER_OR_FOLLOWER);
        match output {
            O::Log(op) => {
                if let raft::LogOpKind::Append(batches) = &op.kind {
                    let bytes = batches.iter().map(|b| b.bytes.len() as u64).sum();
                    self.snapshots.appended(bytes);
                }
                let hw = self.core.high_watermark();
                // A reset that came with the leader's snapshot restores the producer state, the
                // blocks and the groups' committed offsets from it; the offsets follow every
                // change besides.
                let restored = matches!(op.kind,
                    raft::LogOpKind::ResetTo { start, .. } if self.restore_at_reset(start));
                if !restored {
                    self.producing.track(op, hw, gone, &mut self.answers);
                    self.producer_ids.track(op, hw);
                }
                self.groups.track(op, hw, &mut self.group_replies);
            }
            O::HighWatermark(hw) => {
                self.producing.committed(*hw, &mut self.answers);
                let now = self.now;
                self.producer_ids.committed(*hw, now, &mut self.id_answers);
                self.groups.committed(*hw, &mut self.group_replies);
                self.maybe_snapshot(*hw);
            }
            O::RoleChanged { role, .. } if *role != Role::Leader => {
                self.producing.resigned(gone, &mut self.answers);
                self.groups.resigned(&mut self.group_replies);
            }
            O::RoleChanged { .. } => self.groups.led(self.now),
            O::PersistElectionState(_)
            | O::Send { .. }
            | O::Respond { .. }
            | O::ReadLog { .. }
            | O::AppendDone { .. }
            | O::ClientFetchDone { .. }
            | O::ShutdownComplete
            | O::EndpointChanged(_)
            | O::ProbeEndpoint { .. }
            | O::Refused { .. }
            | O::Alert(_)
            | O::Fatal(_) => {}
        }
    }
}
