//! Metric cells a thread updates on its hot path and another thread reads at scrape time
//! (docs/architecture.md, "Metrics").
//!
//! Every cell has exactly one writing thread. An update is a relaxed load and a relaxed store of
//! that thread's own atomic: on x86-64 a plain `mov`/`add`/`mov`, no locked instruction, no
//! cache line shared with another writer. A reader (the metrics thread) loads the same atomics
//! with relaxed ordering: it may see a histogram's buckets a few observations apart from its
//! sum, never a torn value. Two threads writing one cell would lose updates: the cells are not
//! `fetch_add` counters, and the types say so by their name.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};

/// A monotonic counter with one writing thread.
#[derive(Debug, Default)]
pub struct LocalCounter(AtomicU64);

impl LocalCounter {
    pub const fn new() -> Self {
        Self(AtomicU64::new(0))
    }

    /// Adds `n`. Only the owning thread calls this.
    #[inline]
    pub fn add(&self, n: u64) {
        self.0.store(self.0.load(Relaxed).wrapping_add(n), Relaxed);
    }

    /// Replaces the value with a newer one of a counter the owning thread keeps elsewhere
    /// (monotonic by the caller's own invariant).
    #[inline]
    pub fn publish(&self, value: u64) {
        self.0.store(value, Relaxed);
    }

    pub fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }
}

/// A gauge with one writing thread.
#[derive(Debug, Default)]
pub struct LocalGauge(AtomicI64);

impl LocalGauge {
    pub const fn new(value: i64) -> Self {
        Self(AtomicI64::new(value))
    }

    #[inline]
    pub fn set(&self, value: i64) {
        self.0.store(value, Relaxed);
    }

    pub fn get(&self) -> i64 {
        self.0.load(Relaxed)
    }
}

/// A histogram with fixed upper bounds (`value <= bound` lands in that bucket, above the last in
/// the overflow bucket), one writing thread. The counts are kept per bucket (not cumulative) so
/// an observation touches one bucket; [`LocalHistogram::snapshot`] accumulates them, and its
/// count is the buckets' sum, so the `+Inf` bucket always equals the count.
#[derive(Debug)]
pub struct LocalHistogram {
    bounds: &'static [u64],
    buckets: Box<[AtomicU64]>,
    sum: AtomicU64,
}

/// What a scrape reads of a [`LocalHistogram`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistogramSnapshot {
    /// (upper bound, observations at or below it), ascending: cumulative.
    pub buckets: Vec<(u64, u64)>,
    /// Every observation, the overflow bucket included.
    pub count: u64,
    pub sum: u64,
}

impl LocalHistogram {
    /// `bounds` must be strictly ascending and not empty.
    pub fn new(bounds: &'static [u64]) -> Self {
        assert!(!bounds.is_empty(), "a histogram needs a bucket");
        assert!(
            bounds.windows(2).all(|w| w[0] < w[1]),
            "bucket bounds must ascend"
        );
        Self {
            bounds,
            buckets: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum: AtomicU64::new(0),
        }
    }

    /// Notes one observation. Only the owning thread calls this.
    #[inline]
    pub fn observe(&self, value: u64) {
        let index = self.bounds.partition_point(|&bound| bound < value);
        let bucket = &self.buckets[index];
        bucket.store(bucket.load(Relaxed).wrapping_add(1), Relaxed);
        self.sum
            .store(self.sum.load(Relaxed).wrapping_add(value), Relaxed);
    }

    pub fn bounds(&self) -> &'static [u64] {
        self.bounds
    }

    pub fn snapshot(&self) -> HistogramSnapshot {
        let mut running = 0u64;
        let mut buckets = Vec::with_capacity(self.bounds.len());
        for (bound, cell) in self.bounds.iter().zip(self.buckets.iter()) {
            running = running.wrapping_add(cell.load(Relaxed));
            buckets.push((*bound, running));
        }
        let overflow = self.buckets[self.bounds.len()].load(Relaxed);
        HistogramSnapshot {
            buckets,
            count: running.wrapping_add(overflow),
            sum: self.sum.load(Relaxed),
        }
    }
}

/// The largest value seen in the current window and the one before it (Kafka's `*-max` metrics
/// are windowed, not maxima since start), one writing thread. Time is whatever monotonic
/// milliseconds the writer passes in; a reader passes its own reading of the same clock.
#[derive(Debug)]
pub struct WindowedMax {
    window_ms: u64,
    /// Start of the current window.
    start: AtomicU64,
    current: AtomicU64,
    previous: AtomicU64,
}

impl WindowedMax {
    pub fn new(window_ms: u64) -> Self {
        assert!(window_ms > 0);
        Self {
            window_ms,
            start: AtomicU64::new(0),
            current: AtomicU64::new(0),
            previous: AtomicU64::new(0),
        }
    }

    /// Notes `value` at `now_ms`. Only the owning thread calls this.
    pub fn observe(&self, now_ms: u64, value: u64) {
        let start = self.start.load(Relaxed);
        let elapsed = now_ms.saturating_sub(start);
        if elapsed >= self.window_ms {
            // One window ago: the current one becomes the previous; longer: both are stale.
            let carried = if elapsed < 2 * self.window_ms {
                self.current.load(Relaxed)
            } else {
                0
            };
            self.previous.store(carried, Relaxed);
            self.current.store(0, Relaxed);
            self.start.store(now_ms - elapsed % self.window_ms, Relaxed);
        }
        if value > self.current.load(Relaxed) {
            self.current.store(value, Relaxed);
        }
    }

    /// The maximum over the last one to two windows before `now_ms` (0 when nothing was seen).
    pub fn get(&self, now_ms: u64) -> u64 {
        let elapsed = now_ms.saturating_sub(self.start.load(Relaxed));
        let current = self.current.load(Relaxed);
        let previous = self.previous.load(Relaxed);
        if elapsed < self.window_ms {
            current.max(previous)
        } else if elapsed < 2 * self.window_ms {
            current
        } else {
            0
        }
    }
}

/// Microsecond bounds for disk and commit latencies: 50 us doubling to 6.6 s (etcd's
/// `wal_fsync_duration_seconds` starts at 1 ms; this disk's fdatasync takes ~120 us).
pub const LATENCY_US_BOUNDS: &[u64] = &[
    50, 100, 200, 400, 800, 1_600, 3_200, 6_400, 12_800, 25_600, 51_200, 102_400, 204_800, 409_600,
    819_200, 1_638_400, 3_276_800, 6_553_600,
];

/// Byte bounds of a group: 4 KiB doubling to 16 MiB.
pub const GROUP_BYTES_BOUNDS: &[u64] = &[
    4_096, 8_192, 16_384, 32_768, 65_536, 131_072, 262_144, 524_288, 1_048_576, 2_097_152,
    4_194_304, 8_388_608, 16_777_216,
];

/// Batches in a group: 1 doubling to 4096.
pub const GROUP_BATCHES_BOUNDS: &[u64] = &[1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096];

/// Millisecond bounds for elections: 10 ms doubling to about 82 s.
pub const ELECTION_MS_BOUNDS: &[u64] = &[
    10, 20, 40, 80, 160, 320, 640, 1_280, 2_560, 5_120, 10_240, 20_480, 40_960, 81_920,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_histogram_counts_each_value_in_the_first_bucket_that_holds_it() {
        static BOUNDS: &[u64] = &[10, 20, 40];
        let h = LocalHistogram::new(BOUNDS);
        for v in [0, 10, 11, 20, 39, 40, 41, 1_000] {
            h.observe(v);
        }
        let s = h.snapshot();
        assert_eq!(s.buckets, vec![(10, 2), (20, 4), (40, 6)]);
        assert_eq!(s.count, 8);
        assert_eq!(s.sum, 10 + 11 + 20 + 39 + 40 + 41 + 1_000);
    }

    #[test]
    #[should_panic(expected = "ascend")]
    fn bounds_out_of_order_are_refused() {
        static BOUNDS: &[u64] = &[10, 10];
        LocalHistogram::new(BOUNDS);
    }

    #[test]
    fn counters_add_and_publish() {
        let c = LocalCounter::new();
        c.add(3);
        c.add(4);
        assert_eq!(c.get(), 7);
        c.publish(10);
        assert_eq!(c.get(), 10);
    }

    #[test]
    fn a_reader_on_another_thread_sees_every_update_once_the_writer_is_done() {
        let h = std::sync::Arc::new(LocalHistogram::new(LATENCY_US_BOUNDS));
        let c = std::sync::Arc::new(LocalCounter::new());
        let (h2, c2) = (h.clone(), c.clone());
        std::thread::spawn(move || {
            for i in 0..100_000u64 {
                h2.observe(i % 10_000);
                c2.add(1);
            }
        })
        .join()
        .unwrap();
        assert_eq!(c.get(), 100_000);
        let s = h.snapshot();
        assert_eq!(s.count, 100_000);
        assert_eq!(s.sum, 10 * (0..10_000u64).sum::<u64>());
    }

    #[test]
    fn the_windowed_max_forgets_after_two_windows() {
        let m = WindowedMax::new(1_000);
        m.observe(100, 5);
        m.observe(200, 3);
        assert_eq!(m.get(300), 5);
        m.observe(1_100, 2); // a new window: 5 is the previous one's
        assert_eq!(m.get(1_200), 5);
        assert_eq!(m.get(2_050), 2); // the window of 5 is two windows old
        assert_eq!(m.get(3_500), 0);
        m.observe(5_000, 7); // long idle: nothing carried
        assert_eq!(m.get(5_001), 7);
        m.observe(6_500, 1);
        assert_eq!(m.get(6_600), 7);
    }
}
