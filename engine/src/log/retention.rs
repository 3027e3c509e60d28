//! Retention: which whole segments may leave the front of the log (docs/storage.md,
//! "Retention"). Logic only: [`retention_start`] decides from a summary of the segments, and
//! [`super::Log::delete_segments_before`] carries the decision out.
//!
//! Kafka's meaning of `retention.bytes` and `retention.ms`, applied to whole segments only
//! (the log start is always a segment's base offset, so the segment files' names are the
//! persisted log start and a crash between two deletions leaves a contiguous suffix):
//! - `retention.bytes`: the oldest segments go while what stays is still at least that size;
//! - `retention.ms`: a segment goes once its newest batch's MaxTimestamp is older than that;
//! - never the active (last) segment, and never a segment that ends past `limit` (the caller's
//!   bound: the high watermark, and what must stay readable, such as the records whose state is
//!   not kept elsewhere).

use crate::base::Offset;

/// `retention.bytes` and `retention.ms`; `None` is Kafka's -1 (no limit of that kind).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RetentionPolicy {
    pub bytes: Option<u64>,
    pub ms: Option<i64>,
}

impl RetentionPolicy {
    /// Neither limit: the log keeps everything.
    pub fn keeps_everything(&self) -> bool {
        self.bytes.is_none() && self.ms.is_none()
    }
}

/// What retention needs to know of one segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentSummary {
    pub base: Offset,
    /// One past its last offset.
    pub end_offset: Offset,
    pub bytes: u64,
    /// The largest MaxTimestamp of its batches (-1 when it has none).
    pub max_timestamp: i64,
}

/// The log start after retention: the base of the first segment that stays. `segments` are in
/// log order, the last one active; `wall_clock_ms` is the time batches' timestamps are compared
/// with (milliseconds since the Unix epoch, as Kafka clients stamp them); the result is
/// `segments[0].base` when nothing may go.
pub fn retention_start(
    segments: &[SegmentSummary],
    policy: RetentionPolicy,
    wall_clock_ms: i64,
    limit: Offset,
) -> Offset {
    let first = segments.first().expect("a log has a segment");
    debug_assert!(
        segments.windows(2).all(|w| w[0].end_offset == w[1].base),
        "segments are contiguous"
    );
    let total: u64 = segments.iter().map(|s| s.bytes).sum();
    let mut over_size = policy.bytes.map_or(0, |keep| total.saturating_sub(keep));
    let expired_before = policy.ms.map(|ms| wall_clock_ms.saturating_sub(ms));
    let mut start = first.base;
    // The active segment is never deleted: only the sealed ones before it are candidates.
    for segment in &segments[..segments.len() - 1] {
        if segment.end_offset > limit {
            break;
        }
        let by_size = policy.bytes.is_some() && segment.bytes <= over_size;
        let by_time = expired_before.is_some_and(|before| segment.max_timestamp < before);
        if !(by_size || by_time) {
            break;
        }
        over_size = over_size.saturating_sub(segment.bytes);
        start = segment.end_offset;
    }
    debug_assert!(start <= limit.max(first.base));
    start
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Segments of 100 offsets and `bytes` each, the i-th stamped `stamps[i]`.
    fn segments(bytes: &[u64], stamps: &[i64]) -> Vec<SegmentSummary> {
        bytes
            .iter()
            .zip(stamps)
            .enumerate()
            .map(|(i, (&bytes, &max_timestamp))| SegmentSummary {
                base: 100 * i as Offset,
                end_offset: 100 * (i as Offset + 1),
                bytes,
                max_timestamp,
            })
            .collect()
    }

    const NOW: i64 = 1_000_000;

    #[test]
    fn no_policy_keeps_everything() {
        let s = segments(&[10, 10, 10], &[0, 0, 0]);
        assert!(RetentionPolicy::default().keeps_everything());
        assert_eq!(retention_start(&s, RetentionPolicy::default(), NOW, 300), 0);
        for limited in [
            RetentionPolicy {
                bytes: Some(1 << 30),
                ms: None,
            },
            RetentionPolicy {
                bytes: None,
                ms: Some(1),
            },
        ] {
            assert!(!limited.keeps_everything(), "{limited:?}");
        }
    }

    #[test]
    fn by_size_what_stays_is_at_least_the_limit() {
        let s = segments(&[10, 10, 10, 10], &[0; 4]);
        let policy = |bytes| RetentionPolicy {
            bytes: Some(bytes),
            ms: None,
        };
        // 40 bytes: keeping 25 lets one segment go (30 stay), not two (20 < 25).
        assert_eq!(retention_start(&s, policy(25), NOW, 400), 100);
        assert_eq!(retention_start(&s, policy(20), NOW, 400), 200);
        assert_eq!(retention_start(&s, policy(40), NOW, 400), 0);
        // Never the active segment, even with a limit of zero bytes.
        assert_eq!(retention_start(&s, policy(0), NOW, 400), 300);
    }

    #[test]
    fn by_time_the_expired_prefix_goes() {
        let s = segments(&[10, 10, 10, 10], &[100, 200, 900_000, 100]);
        let policy = RetentionPolicy {
            bytes: None,
            ms: Some(500_000),
        };
        // Older than NOW - 500000 = 500000: the first two; the third is recent, so the fourth
        // (old, but after it, and active) stays too.
        assert_eq!(retention_start(&s, policy, NOW, 400), 200);
        // A segment exactly at the boundary is not yet expired.
        let s = segments(&[10, 10], &[500_000, 0]);
        assert_eq!(retention_start(&s, policy, NOW, 200), 0);
    }

    #[test]
    fn either_limit_lets_a_segment_go() {
        let s = segments(&[10, 10, 10], &[0, 900_000, 900_000]);
        // Size alone lets nothing go (30 - 25 = 5 bytes over, less than a segment), time lets
        // the first go.
        let policy = RetentionPolicy {
            bytes: Some(25),
            ms: Some(500_000),
        };
        assert_eq!(retention_start(&s, policy, NOW, 300), 100);
        // Time alone lets only the first go, size (15 over) lets one go: still one.
        let policy = RetentionPolicy {
            bytes: Some(15),
            ms: Some(500_000),
        };
        assert_eq!(retention_start(&s, policy, NOW, 300), 100);
        // Size lets two go while time lets one: two.
        let policy = RetentionPolicy {
            bytes: Some(10),
            ms: Some(500_000),
        };
        assert_eq!(retention_start(&s, policy, NOW, 300), 200);
    }

    #[test]
    fn nothing_past_the_limit_goes() {
        let s = segments(&[10, 10, 10, 10], &[0; 4]);
        let policy = RetentionPolicy {
            bytes: Some(0),
            ms: Some(1),
        };
        // The high watermark inside the second segment: only the first may go.
        assert_eq!(retention_start(&s, policy, NOW, 150), 100);
        assert_eq!(retention_start(&s, policy, NOW, 200), 200);
        assert_eq!(retention_start(&s, policy, NOW, 99), 0);
    }

    #[test]
    fn a_single_segment_never_goes() {
        let s = segments(&[1 << 30], &[0]);
        let policy = RetentionPolicy {
            bytes: Some(0),
            ms: Some(0),
        };
        assert_eq!(retention_start(&s, policy, NOW, 100), 0);
    }
}
