//! Retention on a running node (docs/operations.md, "Retention"): every
//! `log.retention.check.interval.ms` the writer is asked to delete the sealed segments that
//! `retention.bytes` / `retention.ms` let go, never past what the core allows (its retention
//! limit: the high watermark, and the newest committed voter record) nor the newest committed
//! producer-id block record. The writer's answer moves the core's log start; when one of those
//! records is what holds retention back, the leader appends a newer one (docs/protocol.md,
//! "Retention and the log start").

use super::*;
use engine::base::Offset;

/// Retention's state on the node: when it runs next, and whether a run is in the writer.
#[derive(Debug, Default)]
pub(super) struct RetentionState {
    due_ms: u64,
    in_flight: bool,
}

impl Node {
    /// Asks the writer to apply retention when it is due (one run at a time).
    pub(super) fn tend_retention(&mut self, now_ms: u64) {
        let policy = self.config.retention;
        if policy.keeps_everything()
            || self.retention.in_flight
            || now_ms < self.retention.due_ms
            || self.shutdown_deadline.is_some()
        {
            return;
        }
        self.retention.due_ms = now_ms + self.config.retention_check_interval_ms;
        let start = self.core.log_start_offset();
        let unpinned = self.core.high_watermark().unwrap_or(start).max(start);
        let mut limit = self.core.retention_limit();
        if let Some(block) = self.newest_producer_id_block() {
            limit = limit.min(block);
        }
        self.retention.in_flight = true;
        self.writer().submit(WriterRequest::Retain {
            policy,
            limit: limit.max(start),
            unpinned,
        });
    }

    /// A retention run finished: the log starts at `start`; the policy wanted `wanted`.
    pub(super) fn on_retained(&mut self, start: Offset, wanted: Offset) {
        self.retention.in_flight = false;
        if start > self.core.log_start_offset() {
            info!(
                node = self.config.broker_id,
                log_start = start,
                "retention deleted the log's oldest segments"
            );
            self.step(Input::LogStartMoved { start });
        }
        if wanted > start {
            // Held back by a record the log must keep: carry it forward (on the leader) so
            // the next run can go further.
            self.step(Input::CarryVoterRecord { below: wanted });
            self.carry_producer_id_block(wanted);
        }
    }
}
