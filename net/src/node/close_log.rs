//! Which closes of a client connection get a log line. A connection the node closes because of
//! its request (a body that does not decode, an unknown api key, ...) is otherwise invisible to
//! the operator: the client sees only a dropped connection (docs/operations.md, "Warnings at
//! run time"). One line per reason every [`WINDOW`], the next one saying how many were left
//! out, so a client retrying in a loop cannot flood the log. Pure: the caller passes the time.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// At most one line per reason in this long.
pub(crate) const WINDOW: Duration = Duration::from_secs(10);

/// Reasons tracked one by one; any further ones share one entry. The node's reasons are a
/// fixed set (one per check, one per API for a bad body), well below this.
pub(crate) const MAX_REASONS: usize = 64;

/// The entry the reasons beyond [`MAX_REASONS`] share.
const OTHER_REASONS: &str = "(other reasons)";

#[derive(Debug, Default)]
pub(crate) struct CloseLog {
    /// Per reason: when its last line was written, and the closes left out since.
    reasons: HashMap<String, (Instant, u64)>,
}

impl CloseLog {
    /// A close for `reason` at `now`: Some(the closes of that reason left out since its last
    /// line) when this one gets a line, None when it is only counted.
    pub(crate) fn admit(&mut self, reason: &str, now: Instant) -> Option<u64> {
        let key = if self.reasons.contains_key(reason) || self.reasons.len() < MAX_REASONS - 1 {
            reason
        } else {
            OTHER_REASONS
        };
        match self.reasons.get_mut(key) {
            Some((last, left_out)) if now.saturating_duration_since(*last) < WINDOW => {
                *left_out += 1;
                None
            }
            Some((last, left_out)) => {
                *last = now;
                Some(std::mem::take(left_out))
            }
            None => {
                self.reasons.insert(key.to_owned(), (now, 0));
                Some(0)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_reason_per_window_and_the_next_counts_those_left_out() {
        let start = Instant::now();
        let mut log = CloseLog::default();
        assert_eq!(log.admit("bad Metadata body", start), Some(0));
        assert_eq!(
            log.admit("unknown api key", start),
            Some(0),
            "another reason"
        );
        for i in 1..=5 {
            let at = start + Duration::from_secs(i);
            assert_eq!(log.admit("bad Metadata body", at), None);
        }
        assert_eq!(log.admit("bad Metadata body", start + WINDOW), Some(5));
        assert_eq!(log.admit("bad Metadata body", start + WINDOW), None);
        assert_eq!(log.admit("bad Metadata body", start + 2 * WINDOW), Some(1));
        // A clock that went back (it cannot with Instant, but the caller's could) is no line.
        assert_eq!(log.admit("unknown api key", start), None);
    }

    #[test]
    fn memory_is_bounded_whatever_the_reasons() {
        let now = Instant::now();
        let mut log = CloseLog::default();
        let mut lines = 0;
        for i in 0..1_000 {
            if log.admit(&format!("reason {i}"), now).is_some() {
                lines += 1;
            }
        }
        assert!(log.reasons.len() <= MAX_REASONS, "{}", log.reasons.len());
        assert_eq!(
            lines, MAX_REASONS,
            "the shared entry logs once per window too"
        );
        // A reason tracked before the table filled keeps its own entry.
        assert_eq!(log.admit("reason 0", now + WINDOW), Some(0));
    }
}
