//! FetchQuorumRecords (docs/protocol.md section 6): the leader's side (divergence, long-poll
//! parking) and the follower's (truncation, pipelining with the durable offset). The leader's
//! machinery (parking, log reads, expiry) also serves consumers' fetches (`consumer.rs`): a
//! `Fetcher` says who waits, and only the answer differs.

use super::admission::MAX_OFFSET;
use super::core::RaftCore;
use super::discovery::Common;
use super::epoch_state::EpochState;
use super::leader::{Fetcher, ParkedFetch};
use super::requests::{InFlight, RequestKind, Retry};
use super::types::{Batch, NodeId, Offset, OffsetAndEpoch, Output, RequestId, TimeMs};
use super::{
    ErrorCode, FetchQuorumRecordsRequest, FetchQuorumRecordsResponse, Request, Response, Role,
};

impl RaftCore {
    // ----- leader side -----

    fn respond_fetch(
        &self,
        id: RequestId,
        error: ErrorCode,
        batches: Vec<Batch>,
        diverging: Option<OffsetAndEpoch>,
        out: &mut Vec<Output>,
    ) {
        let response = self.fetch_response(error, batches, diverging);
        out.push(Output::Respond {
            id,
            response: Response::FetchQuorumRecords(response),
        });
    }

    fn fetch_response(
        &self,
        error: ErrorCode,
        batches: Vec<Batch>,
        diverging: Option<OffsetAndEpoch>,
    ) -> FetchQuorumRecordsResponse {
        let high_watermark = self
            .qs
            .leader()
            .and_then(|l| l.high_watermark)
            .unwrap_or(-1);
        FetchQuorumRecordsResponse {
            error,
            leader_id: self.leader_hint(),
            leader_epoch: self.qs.epoch(),
            next_fetch_offset: diverging.map_or(-1, |d| d.offset),
            next_fetch_offset_epoch: diverging.map_or(-1, |d| d.epoch),
            batches,
            high_watermark,
            first_dirty_offset: -1,
            last_caught_up_time_ms: -1,
            log_start: None,
            producer_state: None,
            // The follower echoes it in its next fetch; only a leader's counts.
            lease_stamp: self.qs.leader().and_then(|_| i64::try_from(self.now).ok()),
        }
    }

    /// OFFSET_OUT_OF_RANGE for a fetch behind the log start, with it (retention.rs).
    pub(crate) fn respond_fetch_with_log_start(
        &self,
        id: RequestId,
        start: OffsetAndEpoch,
        out: &mut Vec<Output>,
    ) {
        let mut response = self.fetch_response(ErrorCode::OFFSET_OUT_OF_RANGE, Vec::new(), None);
        response.log_start = Some(start);
        out.push(Output::Respond {
            id,
            response: Response::FetchQuorumRecords(response),
        });
    }

    pub(crate) fn respond_fetch_error(
        &self,
        id: RequestId,
        error: ErrorCode,
        out: &mut Vec<Output>,
    ) {
        self.respond_fetch(id, error, Vec::new(), None, out);
    }

    pub(crate) fn handle_fetch(
        &mut self,
        id: RequestId,
        req: FetchQuorumRecordsRequest,
        out: &mut Vec<Output>,
    ) {
        // The cluster id and the fields' ranges were checked before (on_request, admission.rs).
        if req.leader_epoch < self.qs.epoch() {
            return self.respond_fetch_error(id, ErrorCode::FENCED_LEADER_EPOCH, out);
        }
        if req.leader_epoch > self.qs.epoch() {
            return self.respond_fetch_error(id, ErrorCode::UNKNOWN_LEADER_EPOCH, out);
        }
        // Resigned, or prospective after resigning: it led this epoch and gave it up.
        let gave_up = self.qs.leader().is_none() && self.qs.leader_id() == Some(self.qs.local_id());
        if self.is_shutting_down() || gave_up {
            return self.respond_fetch_error(id, ErrorCode::BROKER_NOT_AVAILABLE, out);
        }
        if self.qs.leader().is_none() {
            return self.respond_fetch_error(id, ErrorCode::NOT_LEADER_OR_FOLLOWER, out);
        }
        // A leader from here on: nothing below changes the role.
        // The voter of that id only from the directory the set binds it to (docs/protocol.md,
        // "Voter identity"): the same id from another directory fetches, and is tracked, as an
        // observer, and never counts toward the high watermark.
        let as_voter = self.qs.is_voter(req.replica_id)
            && self
                .qs
                .voter_config()
                .has_voter(req.replica_id, req.replica_directory_id);
        if req.is_follower && !as_voter {
            return self.respond_fetch_error(id, ErrorCode::NOT_FOLLOWER, out);
        }
        self.supersede_parked_fetch(req.replica_id, out);
        let fetcher = Fetcher::Replica {
            request_id: id,
            replica_id: req.replica_id,
        };
        let now = self.now;
        if as_voter {
            self.leading().note_contact(req.replica_id, now);
            self.leading()
                .note_echo(req.replica_id, req.lease_echo, now);
        }
        let leo = self.log.end_offset();
        if self.fetch_behind_log_start(req.fetch_offset, req.last_fetched_epoch) {
            // Answered at once, like a divergence (retention.rs).
            return self.respond_behind_log_start(id, out);
        }
        if let Some(d) = self
            .log
            .epochs
            .divergence(req.fetch_offset, req.last_fetched_epoch, leo)
        {
            // Answered at once, never parked (test 39).
            return self.respond_fetch(id, ErrorCode::NONE, Vec::new(), Some(d), out);
        }
        if req.replica_id >= 0 && req.replica_id != self.qs.local_id() {
            let progress = self.leading().record_fetch(
                req.replica_id,
                as_voter,
                req.fetch_offset,
                req.durable_offset,
                leo,
                now,
            );
            if !req.replica_directory_id.is_zero() {
                progress.directory_id = req.replica_directory_id;
            }
        }
        let hw_advanced = self.update_leader_hw(out);
        if let Some(hold_until) = self.pacing_hold(&req, as_voter) {
            let deadline = self.park_deadline(req.max_wait_ms);
            return self.leading().parked.push(ParkedFetch {
                fetcher,
                fetch_offset: req.fetch_offset,
                deadline,
                hold_until: Some(hold_until.min(deadline)),
            });
        }
        // Past what may be served (rule 9 withholds an undurable voter record) is the end:
        // the fetch waits there, and the record's durability completes it.
        if req.fetch_offset >= self.servable_end() {
            if req.max_wait_ms > 0 && !hw_advanced {
                let deadline = self.park_deadline(req.max_wait_ms);
                self.park(fetcher, req.fetch_offset, deadline);
                return;
            }
            return self.respond_fetch(id, ErrorCode::NONE, Vec::new(), None, out);
        }
        self.respond_with_records(fetcher, req.fetch_offset, out);
    }

    /// A wait longer than the fetch timeout helps nobody: the fetcher would have given up on
    /// this leader by then.
    fn park_deadline(&self, max_wait_ms: i32) -> TimeMs {
        let cap = self
            .config
            .fetch_timeout_ms
            .max(self.config.fetch_max_wait_ms);
        self.now + u64::try_from(max_wait_ms).unwrap_or(0).min(cap)
    }

    /// Observer fetch pacing (docs/protocol.md, "Observer fetch pacing"): an observer whose
    /// last answer, less than the interval ago, gave it everything there was waits until the
    /// interval is over, so that one answer carries what many would. Never a voter, nor an
    /// observer the reassignment wants (its catch-up decides a step), nor one catching up (its
    /// last answer was cut short), nor a fetch that asked not to wait.
    fn pacing_hold(&mut self, req: &FetchQuorumRecordsRequest, as_voter: bool) -> Option<TimeMs> {
        let interval = self.config.observer_fetch_interval_ms;
        if interval == 0 || as_voter || req.max_wait_ms <= 0 {
            return None;
        }
        if self.reassignment_wants(req.replica_id) {
            return None;
        }
        let last = self
            .leading()
            .observers
            .get(&req.replica_id)?
            .last_records_ms?;
        let until = last.saturating_add(interval);
        (until > self.now).then_some(until)
    }

    /// Whether `id` is in the target of a reassignment asked for or in progress.
    fn reassignment_wants(&self, id: NodeId) -> bool {
        let requested = self
            .qs
            .leader()
            .and_then(|l| l.requested_target.as_ref())
            .is_some_and(|t| t.voters.contains(&id));
        let in_progress = self
            .qs
            .voter_config()
            .target
            .as_ref()
            .is_some_and(|t| t.contains(&id));
        requested || in_progress
    }

    pub(crate) fn park(&mut self, fetcher: Fetcher, fetch_offset: Offset, deadline: u64) {
        self.leading().parked.push(ParkedFetch {
            fetcher,
            fetch_offset,
            deadline,
            hold_until: None,
        });
    }

    /// Answers from the tail cache, or asks the driver to read the log (a leader's).
    pub(crate) fn respond_with_records(
        &mut self,
        fetcher: Fetcher,
        from: Offset,
        out: &mut Vec<Output>,
    ) {
        // A fetch checked on arrival but parked (held by pacing, or waiting for data) while
        // retention moved the log start past it: answered as one that arrives behind the
        // start, never with what retention deleted (retention.rs).
        if from < self.log.start_offset() {
            return self.answer_behind_log_start(fetcher, out);
        }
        let max_bytes = match fetcher {
            Fetcher::Replica { .. } => self.config.fetch_max_bytes,
            Fetcher::Consumer { max_bytes, .. } => max_bytes,
        };
        if let Some(batches) = self.log.tail.read(from, max_bytes) {
            return self.answer_records(fetcher, batches, out);
        }
        let consumer = matches!(fetcher, Fetcher::Consumer { .. });
        if consumer && self.leading().consumer_reads() >= super::leader::MAX_CONSUMER_READS {
            // Bounded memory of reads in flight: the consumer fetches again.
            return self.answer_records(fetcher, Vec::new(), out);
        }
        let read_id = self.next_read_id;
        self.next_read_id += 1;
        self.leading().reads.insert(read_id, fetcher);
        out.push(Output::ReadLog {
            read_id,
            from_offset: from,
            max_bytes,
        });
    }

    /// The answer with data (perhaps none) to whoever waits.
    fn answer_records(&mut self, fetcher: Fetcher, batches: Vec<Batch>, out: &mut Vec<Output>) {
        match fetcher {
            Fetcher::Replica {
                request_id,
                replica_id,
            } => {
                let batches = self.withhold_undurable_voter_record(batches);
                if let Some(last) = batches.last() {
                    let whole = last.end_offset() >= self.servable_end();
                    self.note_records_to_observer(replica_id, whole);
                }
                self.respond_fetch(request_id, ErrorCode::NONE, batches, None, out)
            }
            Fetcher::Consumer { id, .. } => self.consumer_records(id, batches, out),
        }
    }

    /// Starts an observer's pacing interval when an answer gave it everything there was; one
    /// cut short by the byte budget leaves it catching up, and unpaced (a voter's progress has
    /// no such time).
    fn note_records_to_observer(&mut self, replica_id: NodeId, whole: bool) {
        let now = self.now;
        if let Some(p) = self
            .qs
            .leader_mut()
            .and_then(|l| l.observers.get_mut(&replica_id))
        {
            p.last_records_ms = whole.then_some(now);
        }
    }

    /// A voter record leaves the leader only once it is durable here (docs/protocol.md,
    /// "Driving the change", rule 9): a replica holding a record its writer lost in a crash
    /// applies a set no leader will finish, and may refuse (by log) the only voter that could
    /// lead the set it left.
    fn withhold_undurable_voter_record(&self, mut batches: Vec<Batch>) -> Vec<Batch> {
        if let Some(record) = self.withheld_voter_record() {
            let keep = batches.partition_point(|b| b.base_offset < record);
            batches.truncate(keep);
        }
        batches
    }

    /// The offset of the voter record rule 9 holds back (not durable here yet), if any.
    pub(crate) fn withheld_voter_record(&self) -> Option<Offset> {
        self.qs
            .pending_voter_record()
            .filter(|record| *record >= self.log.durable_end_offset())
    }

    /// Where a replica's fetch finds nothing more to take: the log end, or the withheld record.
    fn servable_end(&self) -> Offset {
        let end = self.log.end_offset();
        self.withheld_voter_record().map_or(end, |r| r.min(end))
    }

    /// The end of a leadership (or of a read nobody can serve): the error to whoever waits.
    pub(crate) fn answer_fetch_error(
        &self,
        fetcher: Fetcher,
        replica_error: ErrorCode,
        out: &mut Vec<Output>,
    ) {
        match fetcher {
            Fetcher::Replica { request_id, .. } => {
                self.respond_fetch_error(request_id, replica_error, out)
            }
            // A consumer only needs to look for the leader again (docs/protocol.md section 16).
            Fetcher::Consumer { id, .. } => self.consumer_not_leader(id, out),
        }
    }

    pub(crate) fn on_read_done(
        &mut self,
        read_id: u64,
        batches: Vec<Batch>,
        out: &mut Vec<Output>,
    ) {
        // The leadership that asked may be gone: its fetches were answered when it ended.
        let fetcher = self.qs.leader_mut().and_then(|l| l.reads.remove(&read_id));
        if let Some(fetcher) = fetcher {
            self.answer_records(fetcher, batches, out);
        }
    }

    /// A newer fetch from the same replica replaces its parked one (answered empty).
    fn supersede_parked_fetch(&mut self, replica_id: i32, out: &mut Vec<Output>) {
        if replica_id < 0 {
            return;
        }
        let l = self.leading();
        let same = |p: &ParkedFetch| matches!(p.fetcher, Fetcher::Replica { replica_id: r, .. } if r == replica_id);
        let Some(pos) = l.parked.iter().position(same) else {
            return;
        };
        let p = l.parked.swap_remove(pos);
        self.answer_records(p.fetcher, Vec::new(), out);
    }

    /// New data (a leader's, not yet committed): every parked replica fetch gets it; consumers
    /// wait for the high watermark.
    pub(crate) fn complete_parked_with_records(&mut self, out: &mut Vec<Output>) {
        let parked = std::mem::take(&mut self.leading().parked);
        let now = self.now;
        for p in parked {
            match p.fetcher {
                Fetcher::Replica { .. } if !p.held(now) => {
                    self.respond_with_records(p.fetcher, p.fetch_offset, out)
                }
                Fetcher::Replica { .. } | Fetcher::Consumer { .. } => self.leading().parked.push(p),
            }
        }
    }

    pub(crate) fn expire_parked_fetches(&mut self, out: &mut Vec<Output>) {
        let now = self.now;
        let expired: Vec<ParkedFetch> = match self.qs.leader_mut() {
            Some(l) if l.parked.iter().any(|p| p.due() <= now) => {
                let (done, keep) = std::mem::take(&mut l.parked)
                    .into_iter()
                    .partition(|p| p.due() <= now);
                l.parked = keep;
                done
            }
            _ => return,
        };
        for p in expired {
            match p.fetcher {
                // A paced fetch's hold is over: records if there are any, else an ordinary
                // long poll for the rest of its wait.
                Fetcher::Replica { .. } if p.deadline > now => {
                    if p.fetch_offset < self.servable_end() {
                        self.respond_with_records(p.fetcher, p.fetch_offset, out);
                    } else {
                        self.park(p.fetcher, p.fetch_offset, p.deadline);
                    }
                }
                Fetcher::Replica { .. } => self.answer_records(p.fetcher, Vec::new(), out),
                // Waited long enough: what there is.
                Fetcher::Consumer { .. } => self.serve_consumer(p.fetcher, p.fetch_offset, out),
            }
        }
    }

    /// Recomputes the leader's HW from durable offsets; on advance completes appends and tells
    /// parked fetches. Returns whether it advanced.
    pub(crate) fn update_leader_hw(&mut self, out: &mut Vec<Output>) -> bool {
        let own = self.log.durable_end_offset();
        let Some(hw) = self.leading().maybe_advance_hw(own) else {
            return false;
        };
        // Progress is recorded only for fetches at or below our end (others diverge), so a
        // majority can never vouch for offsets this leader does not have.
        let end = self.log.end_offset();
        assert!(
            hw <= end,
            "high watermark {hw} beyond the leader's log end {end}"
        );
        debug_assert!(self.local_hw.is_none_or(|h| h <= hw), "the HW went down");
        self.local_hw = Some(hw);
        out.push(Output::HighWatermark(hw));
        self.fold_committed_voter_records(out);
        self.answer_alter_waits(out);
        self.complete_appends(out);
        // Replicas fetch again and learn the HW; a consumer is answered once enough is committed.
        let parked = std::mem::take(&mut self.leading().parked);
        let now = self.now;
        for p in parked {
            match p.fetcher {
                Fetcher::Replica { .. } if p.held(now) => self.leading().parked.push(p),
                Fetcher::Replica { .. } => self.answer_records(p.fetcher, Vec::new(), out),
                Fetcher::Consumer { min_bytes, .. }
                    if self.committed_bytes_from(p.fetch_offset) >= min_bytes =>
                {
                    self.serve_consumer(p.fetcher, p.fetch_offset, out)
                }
                Fetcher::Consumer { .. } => self.leading().parked.push(p),
            }
        }
        true
    }

    // ----- follower side -----

    pub(crate) fn send_fetch(&mut self, out: &mut Vec<Output>) {
        let Some(leader) = self.qs.fetching_from() else {
            return;
        };
        let fetch_offset = self.log.end_offset();
        let last_fetched_epoch = self.log.last_epoch();
        let durable = self.log.durable_end_offset().min(fetch_offset);
        let request = Request::FetchQuorumRecords(FetchQuorumRecordsRequest {
            cluster_id: self.config.cluster_id.clone(),
            replica_id: self.qs.local_id(),
            leader_epoch: self.qs.epoch(),
            fetch_offset,
            last_fetched_epoch,
            is_follower: !self.qs.is_observer() && !self.fetch_as_observer,
            max_wait_ms: i32::try_from(self.config.fetch_max_wait_ms).unwrap_or(i32::MAX),
            durable_offset: durable,
            replica_directory_id: self.config.directory_id,
            lease_echo: self.qs.lease_stamp(),
        });
        let epoch = self.qs.epoch();
        self.outbound.send(
            out,
            self.now,
            leader,
            epoch,
            RequestKind::Fetch {
                fetch_offset,
                last_fetched_epoch,
            },
            request,
        );
        *self
            .qs
            .sent_durable_mut()
            .expect("only a follower or a prospective fetches") = durable;
    }

    /// Pipelining: the outstanding fetch may be parked at the leader with an older durable
    /// offset; send a fresher one so the leader can advance the HW.
    pub(crate) fn refresh_durable_offset(&mut self, out: &mut Vec<Output>) {
        let durable = self.log.durable_end_offset().min(self.log.end_offset());
        let Some(sent_durable) = self.qs.sent_durable() else {
            unreachable!("called for a node that fetches");
        };
        if durable > sent_durable {
            self.refresh_fetch(out);
        }
    }

    /// Sends a fresh fetch when the one at the current position is outstanding (it may be
    /// parked at the leader), so that what the new one carries arrives now; else the next fetch
    /// (sent by drive) carries it.
    pub(crate) fn refresh_fetch(&mut self, out: &mut Vec<Output>) {
        let current = RequestKind::Fetch {
            fetch_offset: self.log.end_offset(),
            last_fetched_epoch: self.log.last_epoch(),
        };
        if !self.outbound.any_in_flight(|f| f.kind == current) {
            return; // the next fetch (sent by drive) carries it
        }
        // At most two fetches in flight: older ones are dropped (the leader answers a
        // superseded parked fetch at once, and either answer at this position is usable).
        self.outbound
            .forget(|f| matches!(f.kind, RequestKind::Fetch { .. }) && f.kind != current);
        self.outbound.keep_newest(|f| f.kind == current);
        self.send_fetch(out);
    }

    pub(crate) fn handle_fetch_response(
        &mut self,
        f: InFlight,
        mut r: FetchQuorumRecordsResponse,
        out: &mut Vec<Output>,
    ) {
        // The first draft signalled divergence with OFFSET_OUT_OF_RANGE: accept it like NONE
        // when the truncation point is set (docs/protocol.md section 6, "Follower side"). With
        // the log start instead, this log ends behind it (retention.rs).
        let behind_log_start = if r.error == ErrorCode::OFFSET_OUT_OF_RANGE {
            r.log_start.filter(|_| r.next_fetch_offset_epoch < 0)
        } else {
            None
        };
        if r.error == ErrorCode::OFFSET_OUT_OF_RANGE
            && (r.next_fetch_offset_epoch >= 0 || behind_log_start.is_some())
        {
            r.error = ErrorCode::NONE;
        }
        let RequestKind::Fetch {
            fetch_offset,
            last_fetched_epoch,
        } = f.kind
        else {
            return;
        };
        match self.common_response(f.to, r.error, r.leader_id, r.leader_epoch, out) {
            Common::Proceed => {}
            Common::Done => {
                self.retry_fetch_later(f);
                return;
            }
            Common::Retry => {
                if r.error == ErrorCode::NOT_FOLLOWER && self.qs.fetching_from() == Some(f.to) {
                    // The leader's log removed this node: fetch on as an observer, and the
                    // record that removed it arrives with the next answer (docs/protocol.md,
                    // "NOT_FOLLOWER").
                    self.fetch_as_observer = true;
                    self.retry_fetch_later(f);
                } else if r.error == ErrorCode::BROKER_NOT_AVAILABLE && self.qs.is_observer() {
                    let epoch = self.qs.epoch();
                    self.enter_unattached(epoch, out);
                } else {
                    self.retry_fetch_later(f);
                }
                return;
            }
        }
        if self.qs.fetching_from() != Some(f.to) {
            return; // not (or no longer) following the node that answered
        }
        if fetch_offset != self.log.end_offset() || last_fetched_epoch != self.log.last_epoch() {
            return; // an answer to an older position (pipelined or superseded): drop
        }
        if self.qs.role() == Role::Prospective {
            // The leader it kept answered: live after all, so the pre-vote round ends and the
            // node follows it again (docs/protocol.md, "Pre-vote"; nothing is persisted).
            let epoch = self.qs.epoch();
            if !self.enter_follower(epoch, f.to, out) {
                return;
            }
        }
        debug_assert!(
            matches!(self.qs.state(), EpochState::Follower { leader, .. } if *leader == f.to)
        );
        self.role_deadline = Some(self.now + self.config.fetch_timeout_ms);
        self.qs.note_leader_heard(self.now, r.lease_stamp);
        self.stand_when_due = false;
        self.outbound.reset_backoff(f.to);
        if let Some(start) = behind_log_start {
            // The next fetch goes from the new start, or, for an answer that cannot be right,
            // from where it was after a backoff.
            if !self.reset_behind_log_start(start, r.leader_epoch, out) {
                self.retry_fetch_later(f);
            }
            return;
        }
        if r.next_fetch_offset_epoch >= 0 {
            let leader_point = OffsetAndEpoch {
                offset: r.next_fetch_offset,
                epoch: r.next_fetch_offset_epoch,
            };
            self.truncate_diverged(leader_point, out);
            // The HW of a divergence answer is not applied: the remaining log may still
            // diverge, and agreement may take several rounds (docs/protocol.md section 15,
            // item 6).
            return;
        }
        self.append_fetched(r.batches, r.leader_epoch, out);
        if r.high_watermark >= 0 {
            let hw = r.high_watermark.min(self.log.end_offset());
            if self.local_hw.is_none_or(|h| hw > h) {
                self.local_hw = Some(hw);
                out.push(Output::HighWatermark(hw));
                self.fold_committed_voter_records(out);
            }
        }
    }

    /// After an error answer at the current position: back off before fetching again.
    fn retry_fetch_later(&mut self, f: InFlight) {
        let current = RequestKind::Fetch {
            fetch_offset: self.log.end_offset(),
            last_fetched_epoch: self.log.last_epoch(),
        };
        if self.qs.fetching_from().is_some()
            && self.qs.epoch() == f.epoch
            && f.kind == current
            && !self.outbound.any_retry(|r| r == Retry::Fetch)
        {
            self.outbound
                .forget(|g| matches!(g.kind, RequestKind::Fetch { .. }));
            self.outbound
                .schedule_retry(self.now, f.to, Retry::Fetch, &mut self.rng);
        }
    }

    fn truncate_diverged(&mut self, leader_point: OffsetAndEpoch, out: &mut Vec<Output>) {
        let leo = self.log.end_offset();
        let point = self.log.epochs.truncation_point(leader_point, leo);
        // Everything below the log start was committed before retention removed it: a node
        // that has not learned the high watermark since it started still knows that much.
        let hw = self.local_hw.unwrap_or(0);
        let start = self.log.start_offset();
        let floor = if point < hw {
            Some(("the high watermark", hw))
        } else {
            (point < start).then_some(("the log start", start))
        };
        if let Some((what, at)) = floor {
            out.push(Output::Fatal(format!(
                "node {}: leader asks to truncate to {point}, below {what} {at}",
                self.qs.local_id()
            )));
            self.stopped = true;
            return;
        }
        self.log.truncate_to(point, out);
        self.revert_truncated_voter_records(point, out);
    }

    /// Appends the contiguous run of batches starting at our LEO as ONE log op.
    fn append_fetched(&mut self, batches: Vec<Batch>, leader_epoch: i32, out: &mut Vec<Output>) {
        let mut next = self.log.end_offset();
        let mut last_epoch = self.log.last_epoch();
        let mut take = Vec::with_capacity(batches.len());
        for b in batches {
            // Checked first: `end_offset` adds, and a leader's batch is no more trusted than
            // any other input.
            if !(0..=MAX_OFFSET).contains(&b.base_offset) {
                break;
            }
            if b.end_offset() <= next {
                continue;
            }
            if b.base_offset != next
                || b.epoch < last_epoch
                || b.epoch > leader_epoch
                || b.record_count == 0
            {
                break;
            }
            next = b.end_offset();
            last_epoch = b.epoch;
            take.push(b);
        }
        if !take.is_empty() {
            let applied = take.clone();
            self.log.append(take, out);
            self.apply_appended_voter_records(&applied, out);
        }
    }
}
