//! The log start: how far retention may go, what it changes in the core, and a replica that
//! fell behind it (docs/protocol.md, "Retention and the log start").
//!
//! The log has no state machine whose snapshot a replica would need: everything below the log
//! start is committed, so a replica whose log ends below the leader's log start drops its log
//! and starts again, empty, at the leader's start. The one state the core keeps in the log, the
//! voter set, must therefore stay readable at or above the log start: retention never passes
//! the newest committed voter record, and a leader carries that record forward (appends the
//! same set again) when it is all that holds retention back.

use super::core::RaftCore;
use super::leader::Fetcher;
use super::types::{Epoch, Offset, OffsetAndEpoch, Output, PlantedBug, RequestId};

impl RaftCore {
    /// How far the driver may let retention delete: the high watermark this node knows (only
    /// committed data may leave), and never the newest committed voter record. The log start
    /// (nothing may go) when nothing is known to be committed, or when no voter record is
    /// committed: a log that starts above 0 must hold the record of its voter set
    /// ([`RaftCore::voter_set_known`]); a leader then appends one
    /// ([`super::Input::CarryVoterRecord`]).
    pub fn retention_limit(&self) -> Offset {
        let start = self.log.start_offset();
        let committed = self.high_watermark().unwrap_or(start);
        let limit = match self.qs.committed_voter_record() {
            Some(record) => committed.min(record),
            None => start,
        };
        limit.max(start)
    }

    /// Does this node know the voter set its log implies? Always for a log that starts at 0
    /// (the file and the log's records say it). A log that starts above 0 holds the newest
    /// committed voter record of every log it came from (retention never passes it); a log
    /// reset to a leader's log start does not until it fetches that record, which is at or
    /// above the start. Until then the node does not stand for election: its set may be one
    /// the cluster left behind. It votes (docs/protocol.md, "Retention and the log start", rule
    /// 5): a candidate counts by its own set, and the log check holds against a log that
    /// stands for everything below its start.
    pub fn voter_set_known(&self) -> bool {
        let start = self.log.start_offset();
        start == 0
            || self.config.planted == Some(PlantedBug::ResetLogVotesAtOnce)
            || self
                .qs
                .pending_voter_record()
                .or(self.qs.committed_voter_record())
                .is_some_and(|record| record >= start)
    }

    /// The answer of [`RaftCore::enter_candidate`] and `campaign` while the voter set is
    /// unknown: no candidacy; look again an election timeout later.
    pub(crate) fn sit_out_unknown_voter_set(&mut self) -> bool {
        self.role_deadline = Some(self.election_deadline());
        false
    }

    /// Retention deleted the log below `start` ([`super::Input::LogStartMoved`]).
    pub(crate) fn on_log_start_moved(&mut self, start: Offset) {
        self.log.advance_start(start);
    }

    /// A leader appends its voter set again so that its newest committed voter record moves
    /// to or above `below`, the start retention wants, or appends the set's first record
    /// ([`super::Input::CarryVoterRecord`]). Only
    /// under the rules every voter record follows: an entry of this epoch committed, no voter
    /// record uncommitted, no reassignment in progress (that one appends records of its own).
    pub(crate) fn carry_voter_record(&mut self, below: Offset, out: &mut Vec<Output>) {
        let Some(l) = self.qs.leader() else {
            return;
        };
        if l.high_watermark.is_none()
            || self.qs.pending_voter_record().is_some()
            || self.is_shutting_down()
            || self.storage_full
            || self.appends_paused()
        {
            return;
        }
        let config = self.qs.voter_config();
        if config.target.is_some() {
            return;
        }
        if self
            .qs
            .committed_voter_record()
            .is_some_and(|record| record >= below)
        {
            return; // not in retention's way
        }
        let same = config.clone();
        self.append_voter_record(same, out);
    }

    /// Leader side: a fetch from (`fetch_offset`, `last_fetched_epoch`) that the log no longer
    /// holds the start of: below the log start, or in an epoch older than every epoch the log
    /// still has (so the fetcher's log diverges somewhere retention deleted). Never while the
    /// log starts at 0: then every fetch is answered by the divergence rules.
    pub(crate) fn fetch_behind_log_start(
        &self,
        fetch_offset: Offset,
        last_fetched_epoch: Epoch,
    ) -> bool {
        let start = self.log.start_offset();
        self.config.planted != Some(PlantedBug::FetchBehindLogStartServed)
            && start > 0
            && (fetch_offset < start
                || self
                    .log
                    .epochs
                    .end_offset_for_epoch(last_fetched_epoch, self.log.end_offset())
                    .is_none())
    }

    /// OFFSET_OUT_OF_RANGE with the log start and the epoch it is in: the fetcher starts its
    /// log again there.
    pub(crate) fn respond_behind_log_start(&self, id: RequestId, out: &mut Vec<Output>) {
        let offset = self.log.start_offset();
        let epoch = self.log.epochs.epoch_at(offset);
        debug_assert!(epoch.is_some(), "a log start with no epoch");
        let start = OffsetAndEpoch {
            offset,
            epoch: epoch.unwrap_or(0),
        };
        self.respond_fetch_with_log_start(id, start, out);
    }

    /// A parked fetch from below the log start (retention passed it while it waited): the
    /// answer it would get on arrival. A replica starts its log again at the start; a consumer
    /// applies its offset reset (docs/protocol.md, "Retention and the log start").
    pub(crate) fn answer_behind_log_start(&mut self, fetcher: Fetcher, out: &mut Vec<Output>) {
        match fetcher {
            Fetcher::Replica { request_id, .. } => self.respond_behind_log_start(request_id, out),
            Fetcher::Consumer { id, .. } => self.consumer_out_of_range(id, out),
        }
    }

    /// Follower side: the leader's log starts at `start`, above where this log ends or in an
    /// epoch this log does not know. Everything below `start` is committed, and this node's
    /// high watermark is at most `start` (its committed entries match the leader's log), so
    /// dropping the whole log loses nothing committed: the log starts again, empty, at
    /// `start`, and the uncommitted voter records it held are reverted (the newest committed
    /// one is at or above `start` in the leader's log, and comes with the next fetches).
    /// False when the answer cannot be right (then it is ignored).
    pub(crate) fn reset_behind_log_start(
        &mut self,
        start: OffsetAndEpoch,
        leader_epoch: Epoch,
        out: &mut Vec<Output>,
    ) -> bool {
        let hw = self.local_hw.unwrap_or(0);
        let plausible = start.offset > 0
            && start.offset <= super::admission::MAX_OFFSET
            && (0..=leader_epoch).contains(&start.epoch)
            && hw <= start.offset;
        if !plausible {
            return false;
        }
        let base = self.qs.committed_voter_offset();
        self.revert_truncated_voter_records(base, out);
        self.log.reset_to(start.offset, start.epoch, out);
        true
    }
}
