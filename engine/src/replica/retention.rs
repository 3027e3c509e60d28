//! When retention runs (docs/operations.md, "Retention"; docs/protocol.md, "Retention and the
//! log start"): a run every check interval, one at a time, and the bounds the writer's rolls
//! apply between runs, sent when they change and at most every [`ROLL_LIMIT_INTERVAL_MS`].
//! What a run may delete is the replica's ([`super::Replica::retention_bounds`]); which segments
//! go is the writer's (the policy, by bytes and age, is applied to the files).

use crate::base::{Offset, TimeMs};

/// How often, at most, the writer hears new bounds for its rolls: a roll that comes before
/// newer bounds keeps a segment more until the next one (at 80 MB/s, one 256 MiB roll every
/// 3 s). Sent on ticks, which a node makes at least every 100 ms.
pub const ROLL_LIMIT_INTERVAL_MS: TimeMs = 100;

/// What retention may delete: below `limit` (never a committed record the log must keep, nor
/// past the high watermark), and which records below `unpinned` no longer pin anything.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RetentionBounds {
    pub limit: Offset,
    pub unpinned: Offset,
}

/// What the schedule asks of the writer at a tick.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetentionOrder {
    /// Apply retention now, within `bounds`; answered with [`super::Input::Retained`].
    Run(RetentionBounds),
    /// The bounds the rolls apply to the oldest segment changed.
    RollBounds(RetentionBounds),
}

/// Retention's schedule on one replica.
#[derive(Debug)]
pub struct RetentionSchedule {
    /// `log.retention.check.interval.ms`; None when the policy keeps everything.
    interval: Option<TimeMs>,
    /// When the next run is due (0: at the first tick).
    due: TimeMs,
    /// The bounds of the run in the writer, if one is (answered by [`Self::finished`]).
    in_flight: Option<RetentionBounds>,
    /// Shutting down: nothing more is started.
    stopped: bool,
    roll_due: TimeMs,
    /// The bounds last sent for the rolls.
    roll_bounds: RetentionBounds,
    /// The highest limit ever sent for the rolls: a roll may apply any bounds it was sent
    /// (newer ones may be on their way to it), never more.
    roll_limit_sent: Offset,
}

impl RetentionSchedule {
    /// A schedule with a run every `interval` ms, or none at all.
    pub fn new(interval: Option<TimeMs>) -> Self {
        assert!(
            interval != Some(0),
            "a retention check interval of 0 would run retention on every tick"
        );
        Self {
            interval,
            due: 0,
            in_flight: None,
            stopped: false,
            roll_due: 0,
            roll_bounds: RetentionBounds::default(),
            roll_limit_sent: 0,
        }
    }

    /// What is due at `now`, given the replica's `bounds`: new roll bounds (when changed, at
    /// most every [`ROLL_LIMIT_INTERVAL_MS`]) and a run (when due and none is in the writer),
    /// in that order.
    pub fn tend(&mut self, now: TimeMs, bounds: RetentionBounds) -> [Option<RetentionOrder>; 2] {
        let Some(interval) = self.interval.filter(|_| !self.stopped) else {
            return [None, None];
        };
        assert!(
            bounds.limit <= bounds.unpinned,
            "retention's limit {} past the unpinned offset {}",
            bounds.limit,
            bounds.unpinned
        );
        let mut orders = [None, None];
        if now >= self.roll_due {
            self.roll_due = now + ROLL_LIMIT_INTERVAL_MS;
            if bounds != self.roll_bounds {
                self.roll_bounds = bounds;
                self.roll_limit_sent = self.roll_limit_sent.max(bounds.limit);
                orders[0] = Some(RetentionOrder::RollBounds(bounds));
            }
        }
        if self.in_flight.is_none() && now >= self.due {
            self.due = now + interval;
            self.in_flight = Some(bounds);
            orders[1] = Some(RetentionOrder::Run(bounds));
        }
        orders
    }

    /// The run in the writer finished: the bounds it was given.
    pub fn finished(&mut self) -> RetentionBounds {
        self.in_flight
            .take()
            .expect("a retention run ended that was never asked for")
    }

    /// The highest limit ever sent for the rolls (0: none sent).
    pub fn roll_limit_sent(&self) -> Offset {
        self.roll_limit_sent
    }

    /// No run starts from now on (a graceful shutdown began).
    pub fn stop(&mut self) {
        self.stopped = true;
    }

    /// When the next run is due, if one can start (for a driver that ticks only at deadlines;
    /// the roll bounds ride the ticks that come anyway).
    pub fn next_deadline(&self) -> Option<TimeMs> {
        match (self.interval, self.in_flight.is_some() || self.stopped) {
            (Some(_), false) => Some(self.due),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bounds(limit: Offset, unpinned: Offset) -> RetentionBounds {
        RetentionBounds { limit, unpinned }
    }

    #[test]
    fn a_run_at_the_first_tick_then_one_per_interval_one_at_a_time() {
        let mut s = RetentionSchedule::new(Some(1_000));
        let b = bounds(5, 9);
        assert_eq!(
            s.tend(0, b),
            [
                Some(RetentionOrder::RollBounds(b)),
                Some(RetentionOrder::Run(b))
            ]
        );
        assert_eq!(s.next_deadline(), None, "a run is in the writer");
        // Due again at 1,000, but the first run has not finished.
        assert_eq!(s.tend(1_000, b), [None, None]);
        s.finished();
        assert_eq!(s.next_deadline(), Some(1_000));
        assert_eq!(s.tend(1_000, b), [None, Some(RetentionOrder::Run(b))]);
        s.finished();
        assert_eq!(s.tend(1_999, b), [None, None], "not due before 2,000");
        assert_eq!(s.tend(2_000, b), [None, Some(RetentionOrder::Run(b))]);
    }

    #[test]
    fn roll_bounds_are_sent_when_they_change_at_most_every_interval() {
        let mut s = RetentionSchedule::new(Some(60_000));
        s.tend(0, bounds(1, 2));
        assert_eq!(s.tend(50, bounds(3, 4)), [None, None], "too soon");
        assert_eq!(
            s.tend(ROLL_LIMIT_INTERVAL_MS, bounds(3, 4)),
            [Some(RetentionOrder::RollBounds(bounds(3, 4))), None]
        );
        assert_eq!(
            s.tend(2 * ROLL_LIMIT_INTERVAL_MS, bounds(3, 4)),
            [None, None],
            "unchanged"
        );
    }

    #[test]
    fn nothing_when_everything_is_kept_or_after_stop() {
        let mut keep = RetentionSchedule::new(None);
        assert_eq!(keep.tend(0, bounds(1, 2)), [None, None]);
        assert_eq!(keep.next_deadline(), None);
        let mut s = RetentionSchedule::new(Some(10));
        s.stop();
        assert_eq!(s.tend(0, bounds(1, 2)), [None, None]);
        assert_eq!(s.next_deadline(), None);
    }
}
