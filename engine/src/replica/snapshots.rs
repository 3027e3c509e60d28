//! When the producer-state snapshot is taken, and what it means for retention
//! (docs/storage.md, "The producer-state snapshot"). A snapshot at S holds the idempotent
//! producers' state and the committed producer-id blocks below S; a start uses it only while S
//! is above the log's start. So retention never moves the log start to S or past it: it may
//! delete below S - 1 at most, where S is the newest snapshot known to be written (a producer
//! whose batches retention deleted is then still known after a crash and a restart, and its
//! retry is answered as a duplicate, not written twice). A snapshot is due after enough log or
//! time, at the first high watermark of a run, and when retention wants to go past the newest.

use crate::base::{Offset, TimeMs};

/// A snapshot is due once a segment's worth of batches (`log.segment.bytes`), at most this
/// many bytes, were appended since the last one: a start then replays at most about this much
/// log (docs/benchmarks.md, "Producer-state rebuild at start").
pub const MAX_SNAPSHOT_EVERY_BYTES: u64 = 64 << 20;
/// ... or once this long has passed with anything appended.
pub const SNAPSHOT_EVERY_MS: TimeMs = 300_000;

/// The schedule of one replica's producer-state snapshots.
#[derive(Debug)]
pub struct SnapshotSchedule {
    every_bytes: u64,
    /// The offset of the last snapshot handed to the driver this run, or the one loaded at start
    /// (0: none).
    last_offset: Offset,
    last_at: TimeMs,
    appended_since: u64,
    /// The snapshot being written, if any: the next waits for it.
    writing: Option<Offset>,
    /// The newest snapshot known written: the one the driver loaded at start, or one written
    /// since.
    written: Option<Offset>,
    /// Retention wanted to go past the written one: take the next at the first chance.
    wanted: bool,
}

impl SnapshotSchedule {
    /// A schedule for a log of `segment_bytes` segments, started with the snapshot at
    /// `loaded` (None: the driver read the whole log).
    pub fn new(segment_bytes: u64, loaded: Option<Offset>) -> Self {
        assert!(loaded.is_none_or(|s| s > 0), "a snapshot is never at 0");
        Self {
            every_bytes: segment_bytes.clamp(1, MAX_SNAPSHOT_EVERY_BYTES),
            // Never one at or below the file's (it would replace it with an older state).
            last_offset: loaded.unwrap_or(0),
            last_at: 0,
            appended_since: 0,
            writing: None,
            written: loaded,
            wanted: false,
        }
    }

    /// `bytes` of batches were appended to the log.
    pub fn appended(&mut self, bytes: u64) {
        self.appended_since = self.appended_since.saturating_add(bytes);
    }

    /// Whether a snapshot at `hw` is due at `now`, with the log starting at `log_start`: past
    /// the last one, none being written, and after enough bytes or time, or once the log start
    /// reached the last one (the first of a run, or after a reset), or when retention asked.
    pub fn due(&self, hw: Offset, log_start: Offset, now: TimeMs) -> bool {
        hw > self.last_offset
            && self.writing.is_none()
            && (self.appended_since >= self.every_bytes
                || (self.appended_since > 0
                    && now.saturating_sub(self.last_at) >= SNAPSHOT_EVERY_MS)
                || log_start >= self.last_offset
                || self.wanted)
    }

    /// The snapshot at `offset` went to the driver to be written.
    pub fn handed_over(&mut self, offset: Offset, now: TimeMs) {
        assert!(
            offset > self.last_offset && self.writing.is_none(),
            "a snapshot at {offset} after {} (writing: {:?})",
            self.last_offset,
            self.writing
        );
        self.writing = Some(offset);
        self.last_offset = offset;
        self.last_at = now;
        self.appended_since = 0;
        self.wanted = false;
    }

    /// The last snapshot of a run (a graceful shutdown), at `offset`, went to the driver: after
    /// the one being written, if any (the driver writes them in order and need not answer).
    pub fn last_handed_over(&mut self, offset: Offset) {
        assert!(
            offset > self.last_offset,
            "a last snapshot at {offset} after {}",
            self.last_offset
        );
        self.writing = Some(offset);
        self.last_offset = offset;
    }

    /// The snapshot at `offset` was written (`ok`), or its write failed (the last written one
    /// stays the one a start would use).
    pub fn finished(&mut self, offset: Offset, ok: bool) {
        assert_eq!(
            self.writing,
            Some(offset),
            "a snapshot write ended that was not asked for"
        );
        self.writing = None;
        if ok {
            assert!(
                self.written.is_none_or(|w| w < offset),
                "snapshots are written in order"
            );
            self.written = Some(offset);
        }
    }

    /// Whether a snapshot at `offset` may be handed over now: past the last one, none being
    /// written.
    pub fn can_hand_over(&self, offset: Offset) -> bool {
        offset > self.last_offset && self.writing.is_none()
    }

    /// The producer state was restored at `offset` (a reset with the leader's snapshot): no
    /// snapshot at or below it can be taken, and one past it is wanted soon, so that a restart
    /// finds the state in this replica's own file.
    pub fn restored(&mut self, offset: Offset) {
        self.last_offset = self.last_offset.max(offset);
        self.wanted = true;
    }

    /// Retention was held back (it wanted more than it was allowed): the next high watermark
    /// takes a snapshot, so that the next run can go past the current one.
    pub fn want(&mut self) {
        self.wanted = true;
    }

    /// The newest offset retention may move the log start to: below the newest written
    /// snapshot, so that a start can still use it; the log start when none is written.
    pub fn retention_limit(&self, log_start: Offset) -> Offset {
        match self.written {
            Some(s) => (s - 1).max(log_start),
            None => log_start,
        }
    }

    /// The newest snapshot known written.
    pub fn written(&self) -> Option<Offset> {
        self.written
    }

    /// The last snapshot handed over this run, or the one loaded at start (0: none).
    pub fn last_offset(&self) -> Offset {
        self.last_offset
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_is_due_after_enough_bytes_or_time_and_only_past_the_last() {
        let mut s = SnapshotSchedule::new(1 << 20, None);
        assert!(s.due(11, 0, 0), "the first of a run");
        s.handed_over(10, 0);
        s.finished(10, true);
        assert!(!s.due(11, 0, 0));
        s.appended((1 << 20) - 1);
        assert!(!s.due(11, 0, 0));
        assert!(s.due(11, 0, SNAPSHOT_EVERY_MS));
        s.appended(1);
        assert!(s.due(11, 0, 0));
        assert!(!s.due(10, 0, 0), "not again at the same offset");
        let mut idle = SnapshotSchedule::new(1 << 20, None);
        idle.handed_over(10, 0);
        idle.finished(10, true);
        assert!(!idle.due(11, 0, SNAPSHOT_EVERY_MS * 2), "nothing appended");
        assert!(!idle.due(11, 9, 0));
        assert!(
            idle.due(11, 10, 0),
            "the log start reached the last snapshot"
        );
        idle.want();
        assert!(idle.due(11, 0, 0), "retention asked for one");
        idle.handed_over(11, 0);
        assert!(
            !idle.due(20, 11, 0),
            "not while the last one is being written"
        );
    }

    #[test]
    fn retention_stays_below_the_newest_written_snapshot() {
        let mut s = SnapshotSchedule::new(1 << 20, None);
        assert_eq!(s.retention_limit(3), 3, "none written: nothing goes");
        s.handed_over(10, 0);
        assert_eq!(s.retention_limit(3), 3, "being written is not written");
        s.finished(10, true);
        assert_eq!(s.retention_limit(3), 9);
        s.handed_over(20, 0);
        s.finished(20, false);
        assert_eq!(s.retention_limit(3), 9, "a failed write changes nothing");
        assert_eq!(s.retention_limit(12), 12, "never below the log start");
        let loaded = SnapshotSchedule::new(1 << 20, Some(7));
        assert_eq!(loaded.retention_limit(0), 6);
        assert!(!loaded.due(7, 0, 0), "never at or below the loaded one");
        assert!(
            !loaded.due(8, 0, 0),
            "the loaded one serves until one is due"
        );
        assert!(loaded.due(8, 7, 0), "the log start reached the loaded one");
    }
}
