//! Retention on a running node (docs/operations.md, "Retention"): every
//! `log.retention.check.interval.ms` the writer is asked to delete the sealed segments that
//! `retention.bytes` / `retention.ms` let go, never past what the core allows (its retention
//! limit: the high watermark, and the newest committed voter record) nor the newest committed
//! producer-id block record. The writer's answer moves the core's log start; when one of those
//! records is what holds retention back, the leader appends a newer one (docs/protocol.md,
//! "Retention and the log start").

use super::*;
use engine::base::Offset;

/// How often, at most, the writer hears the newest retention limit for its rolls
/// ([`WriterRequest::RetentionLimit`]): a roll that comes before a newer limit keeps a
/// segment more until the next one (at 80 MB/s, one 256 MiB roll every 3 s).
const ROLL_LIMIT_INTERVAL_MS: u64 = 100;

/// Retention's state on the node: when it runs next, whether a run is in the writer, and the
/// last limit the writer was given for its rolls (and when it may hear the next).
#[derive(Debug, Default)]
pub(super) struct RetentionState {
    due_ms: u64,
    in_flight: bool,
    roll_limit_due_ms: u64,
    /// The limit and the high watermark last sent for the rolls.
    roll_limits: (Offset, Offset),
}

impl Node {
    /// Asks the writer to apply retention when it is due (one run at a time).
    pub(super) fn tend_retention(&mut self, now_ms: u64) {
        let policy = self.config.retention;
        if policy.keeps_everything() || self.shutdown_deadline.is_some() {
            return;
        }
        self.tend_roll_limit(now_ms);
        if self.retention.in_flight || now_ms < self.retention.due_ms {
            return;
        }
        self.retention.due_ms = now_ms + self.config.retention_check_interval_ms;
        let (limit, unpinned) = self.replica.retention_bounds();
        self.retention.in_flight = true;
        self.writer().submit(WriterRequest::Retain {
            policy,
            limit,
            unpinned,
        });
    }

    /// Keeps the writer's limits for its rolls fresh (every [`ROLL_LIMIT_INTERVAL_MS`] at most,
    /// when they changed; after a reset they grow, since the log starts again further on):
    /// between retention runs, minutes apart by default, a log at its retention size then
    /// reuses its oldest segment at every roll (docs/storage.md, "Recycling at the roll").
    fn tend_roll_limit(&mut self, now_ms: u64) {
        if now_ms < self.retention.roll_limit_due_ms {
            return;
        }
        self.retention.roll_limit_due_ms = now_ms + ROLL_LIMIT_INTERVAL_MS;
        let (limit, unpinned) = self.replica.retention_bounds();
        if (limit, unpinned) == self.retention.roll_limits {
            return;
        }
        self.retention.roll_limits = (limit, unpinned);
        self.writer().submit(WriterRequest::RetentionLimit {
            policy: self.config.retention,
            limit,
            unpinned,
        });
    }

    /// A retention run finished: the log starts at `start`; the policy wanted `wanted`.
    pub(super) fn on_retained(&mut self, start: Offset, wanted: Offset) {
        self.retention.in_flight = false;
        self.on_log_start_moved(start);
        if wanted > start {
            self.carry_pinned_records(wanted);
        }
    }

    /// Retention is held back below `wanted` by a record the log must keep: carry it forward
    /// (on the leader) so that the next run, or the next roll, can go further.
    pub(super) fn carry_pinned_records(&mut self, wanted: Offset) {
        self.step(Input::CarryVoterRecord { below: wanted });
        self.step(engine::replica::Input::CarryProducerIdBlock { below: wanted });
    }

    /// The writer let the log's oldest segments go (a retention run, or a roll that reused the
    /// oldest one's file): the core's log start follows.
    pub(super) fn on_log_start_moved(&mut self, start: Offset) {
        if start > self.replica.core().log_start_offset() {
            info!(
                node = self.config.broker_id,
                log_start = start,
                "retention let the log's oldest segments go"
            );
            self.step(Input::LogStartMoved { start });
        }
    }
}
