//! Recent batches kept in memory (as `Bytes`, no copy) so the leader answers most fetches
//! without a log read. Bounded by `tail_cache_bytes`; the oldest batches go first.

use std::collections::VecDeque;

use super::types::{Batch, Offset};

#[derive(Debug)]
pub(crate) struct TailCache {
    batches: VecDeque<Batch>,
    bytes: usize,
    budget: usize,
}

impl TailCache {
    pub(crate) fn new(budget: usize) -> Self {
        Self {
            batches: VecDeque::new(),
            bytes: 0,
            budget,
        }
    }

    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    pub(crate) fn push(&mut self, batch: Batch) {
        if self
            .batches
            .back()
            .is_some_and(|last| last.end_offset() != batch.base_offset)
        {
            // Not contiguous (cannot happen with well-formed ops): start over rather than
            // serve a gap.
            self.clear();
        }
        self.bytes += batch.bytes.len();
        self.batches.push_back(batch);
        // Always keep the newest batch even if it alone exceeds the budget.
        while self.bytes > self.budget && self.batches.len() > 1 {
            let old = self.batches.pop_front().expect("non-empty");
            self.bytes -= old.bytes.len();
        }
    }

    pub(crate) fn truncate_to(&mut self, offset: Offset) {
        while self.batches.back().is_some_and(|b| b.end_offset() > offset) {
            let b = self.batches.pop_back().expect("non-empty");
            self.bytes -= b.bytes.len();
        }
    }

    pub(crate) fn clear(&mut self) {
        self.batches.clear();
        self.bytes = 0;
    }

    /// Bytes of the cached batches from the one containing `from` up to those ending at or before
    /// `to` (whole batches only), or None when `from` is not covered by the cache.
    pub(crate) fn bytes_between(&self, from: Offset, to: Offset) -> Option<usize> {
        let first = self.batches.front()?;
        if from < first.base_offset {
            return None;
        }
        let idx = self.batches.partition_point(|b| b.end_offset() <= from);
        let bytes = self
            .batches
            .range(idx..)
            .take_while(|b| b.end_offset() <= to)
            .map(|b| b.bytes.len())
            .sum();
        Some(bytes)
    }

    /// Batches from the one containing `from`, up to about `max_bytes` (at least one), or None
    /// when `from` is not covered by the cache.
    pub(crate) fn read(&self, from: Offset, max_bytes: usize) -> Option<Vec<Batch>> {
        let first = self.batches.front()?;
        if from < first.base_offset {
            return None;
        }
        let idx = self.batches.partition_point(|b| b.end_offset() <= from);
        if idx == self.batches.len() {
            return None;
        }
        let mut taken = 0usize;
        let mut result = Vec::new();
        for b in self.batches.range(idx..) {
            if !result.is_empty() && taken + b.bytes.len() > max_bytes {
                break;
            }
            taken += b.bytes.len();
            result.push(b.clone());
        }
        Some(result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn batch(base: Offset, count: u32, len: usize) -> Batch {
        Batch {
            base_offset: base,
            epoch: 1,
            record_count: count,
            is_control: false,
            bytes: Bytes::from(vec![0u8; len]),
        }
    }

    /// A cache of `budget` bytes that was handed batches of two records, (base offset, bytes)
    /// each, in this order.
    fn cache_of(budget: usize, batches: &[(Offset, usize)]) -> TailCache {
        let mut c = TailCache::new(budget);
        for &(base, len) in batches {
            c.push(batch(base, 2, len));
        }
        c
    }

    #[test]
    fn evicts_oldest_and_reads_from_containing_batch() {
        let mut c = cache_of(250, &[(0, 100), (2, 100), (4, 100)]);
        assert!(c.read(0, 1000).is_none(), "first batch evicted");
        let r = c.read(3, 1000).expect("cached");
        assert_eq!(
            r.iter().map(|b| b.base_offset).collect::<Vec<_>>(),
            vec![2, 4]
        );
        assert_eq!(c.read(2, 150).expect("cached").len(), 1);
        assert!(c.read(6, 1000).is_none());
        c.truncate_to(4);
        assert!(c.read(4, 1000).is_none());
    }

    #[test]
    fn bytes_between_counts_whole_batches_up_to_the_bound() {
        assert_eq!(TailCache::new(1000).bytes_between(0, 10), None, "empty");
        let c = cache_of(1000, &[(2, 100), (4, 50), (6, 10)]);
        assert_eq!(c.bytes_between(1, 8), None, "before the cache");
        assert_eq!(c.bytes_between(2, 8), Some(160));
        assert_eq!(c.bytes_between(3, 8), Some(160), "from inside a batch");
        assert_eq!(c.bytes_between(2, 6), Some(150));
        assert_eq!(
            c.bytes_between(2, 5),
            Some(100),
            "a batch past the bound is not counted"
        );
        assert_eq!(c.bytes_between(4, 4), Some(0));
        assert_eq!(c.bytes_between(8, 20), Some(0), "at the end");
    }

    /// Caught: `>` turned into `>=` in both of `push`'s bounds. Batches that fill the budget
    /// exactly all stay; one batch alone past the budget stays too.
    #[test]
    fn the_budget_holds_batches_that_fill_it_exactly_and_one_past_it_alone() {
        let c = cache_of(200, &[(0, 100), (2, 100)]);
        assert_eq!(
            (c.bytes(), c.read(0, 1000).map(|r| r.len())),
            (200, Some(2))
        );
        let c = cache_of(50, &[(0, 100)]);
        assert_eq!(
            (c.bytes(), c.read(0, 1000).map(|r| r.len())),
            (100, Some(1))
        );
    }

    /// Caught: `>` turned into `>=` in `truncate_to`, and its `-=` into `+=` or `/=`. A
    /// truncation keeps the batch that ends at it and counts what is left.
    #[test]
    fn a_truncation_keeps_the_batch_ending_at_it_and_its_bytes() {
        let mut c = cache_of(1000, &[(0, 100), (2, 30), (4, 7)]);
        c.truncate_to(4);
        assert_eq!(c.bytes(), 130);
        assert_eq!(c.read(2, 1000).map(|r| r.len()), Some(1));
    }

    /// Caught: the body of `clear` deleted. A batch that does not follow on starts the cache
    /// over: nothing older is served or counted.
    #[test]
    fn a_batch_that_does_not_follow_on_starts_the_cache_over() {
        let mut c = TailCache::new(1000);
        c.push(batch(0, 2, 100));
        c.push(batch(5, 2, 10));
        assert_eq!(c.bytes(), 10);
        assert!(c.read(0, 1000).is_none());
        assert_eq!(c.read(5, 1000).map(|r| r.len()), Some(1));
    }
}
