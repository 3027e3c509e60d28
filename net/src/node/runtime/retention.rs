//! Retention on a running node (docs/operations.md, "Retention"): the replica decides when a
//! run is due and what it may delete (`engine::replica::retention`: every
//! `log.retention.check.interval.ms`, never past the high watermark, the newest committed voter
//! record or producer-id block record); the node hands its orders to the writer, which deletes
//! the sealed segments that `retention.bytes` / `retention.ms` let go, and hands the writer's
//! answers back. When a record holds retention back, the replica carries it forward
//! (docs/protocol.md, "Retention and the log start").

use super::*;
use engine::base::Offset;
use engine::replica::RetentionBounds;

impl Node {
    /// The replica asked for a retention run within `bounds`.
    pub(super) fn retain(&mut self, bounds: RetentionBounds) {
        self.writer().submit(WriterRequest::Retain {
            policy: self.config.retention,
            limit: bounds.limit,
            unpinned: bounds.unpinned,
        });
    }

    /// The bounds the writer's rolls apply between runs changed: between retention runs,
    /// minutes apart by default, a log at its retention size then reuses its oldest segment at
    /// every roll (docs/storage.md, "Recycling at the roll").
    pub(super) fn roll_bounds(&mut self, bounds: RetentionBounds) {
        self.writer().submit(WriterRequest::RetentionLimit {
            policy: self.config.retention,
            limit: bounds.limit,
            unpinned: bounds.unpinned,
        });
    }

    /// A retention run finished: the log starts at `start`; the policy wanted `wanted`.
    pub(super) fn on_retained(&mut self, start: Offset, wanted: Offset) {
        self.log_start_moving(start);
        self.step(engine::replica::Input::Retained { start, wanted });
    }

    /// The writer let the log's oldest segments go (a roll that reused the oldest one's file):
    /// the replica checks it against the bounds it gave and moves the core's log start.
    pub(super) fn on_log_start_moved(&mut self, start: Offset) {
        self.log_start_moving(start);
        self.step(engine::replica::Input::Rolled { start });
    }

    /// Says so when the log's start moves to `start`.
    fn log_start_moving(&self, start: Offset) {
        let moving = start > self.replica.core().log_start_offset();
        if moving {
            info!(
                node = self.config.broker_id,
                log_start = start,
                "retention let the log's oldest segments go"
            );
        }
    }
}
