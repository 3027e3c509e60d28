//! The leader-epoch cache: which epoch's leader appended which offsets (protocol.md 1, 8.3, 8.5).

use crate::raft::{Epoch, Offset};

/// Ordered (epoch, start offset) pairs, strictly ascending in epoch and non-decreasing in offset.
///
/// Entry `i` covers offsets `start_i .. start_{i+1}` (the last one up to the log end offset).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EpochCache {
    entries: Vec<(Epoch, Offset)>,
}

/// Why an epoch could not be recorded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EpochCacheError {
    #[error("epoch {epoch} at offset {offset} goes back from epoch {last_epoch}")]
    EpochRegression {
        epoch: Epoch,
        offset: Offset,
        last_epoch: Epoch,
    },
    #[error(
        "epoch {epoch} starts at offset {offset}, before epoch {last_epoch}'s start {last_start}"
    )]
    OffsetRegression {
        epoch: Epoch,
        offset: Offset,
        last_epoch: Epoch,
        last_start: Offset,
    },
}

impl EpochCache {
    pub fn new() -> Self {
        Self::default()
    }

    /// Builds a cache from checkpointed entries, checking their order.
    pub fn from_entries(entries: &[(Epoch, Offset)]) -> Result<Self, EpochCacheError> {
        let mut cache = Self::new();
        for &(epoch, start) in entries {
            cache.assign(epoch, start)?;
        }
        Ok(cache)
    }

    pub fn entries(&self) -> &[(Epoch, Offset)] {
        &self.entries
    }

    /// The epoch of the last entry (0, the primordial epoch, when empty).
    pub fn last_epoch(&self) -> Epoch {
        self.entries.last().map_or(0, |&(epoch, _)| epoch)
    }

    /// Records that `epoch` starts at `start_offset`. The same epoch again is a no-op; an older
    /// epoch, or a start before the latest entry's, is an error.
    pub fn assign(&mut self, epoch: Epoch, start_offset: Offset) -> Result<(), EpochCacheError> {
        let Some(&(last_epoch, last_start)) = self.entries.last() else {
            self.entries.push((epoch, start_offset));
            return Ok(());
        };
        if epoch == last_epoch {
            return Ok(());
        }
        if epoch < last_epoch {
            return Err(EpochCacheError::EpochRegression {
                epoch,
                offset: start_offset,
                last_epoch,
            });
        }
        if start_offset < last_start {
            return Err(EpochCacheError::OffsetRegression {
                epoch,
                offset: start_offset,
                last_epoch,
                last_start,
            });
        }
        // An epoch that appended nothing leaves an entry starting where the next one starts;
        // it is superseded (Kafka keeps only epochs that own offsets).
        if start_offset == last_start {
            self.entries.pop();
        }
        self.entries.push((epoch, start_offset));
        Ok(())
    }

    /// The largest cached epoch `<= epoch` with its end offset: the next entry's start offset, or
    /// `log_end_offset` for the latest epoch. None when no cached epoch is `<= epoch`.
    pub fn end_offset_for_epoch(
        &self,
        epoch: Epoch,
        log_end_offset: Offset,
    ) -> Option<(Epoch, Offset)> {
        let index = self.entries.partition_point(|&(e, _)| e <= epoch);
        if index == 0 {
            return None;
        }
        let (found, _) = self.entries[index - 1];
        let end = self
            .entries
            .get(index)
            .map_or(log_end_offset, |&(_, start)| start);
        Some((found, end))
    }

    /// Drops every entry starting at or beyond `offset` (the log is truncated to `offset`).
    pub fn truncate_from(&mut self, offset: Offset) {
        let keep = self.entries.partition_point(|&(_, start)| start < offset);
        self.entries.truncate(keep);
    }

    /// Keeps only entries that start before `offset` (what a checkpoint at `offset` may claim).
    pub fn entries_before(&self, offset: Offset) -> Vec<(Epoch, Offset)> {
        self.entries
            .iter()
            .copied()
            .filter(|&(_, start)| start < offset)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn worked_example() -> EpochCache {
        EpochCache::from_entries(&[(1, 0), (3, 3), (5, 6)]).unwrap()
    }

    #[test]
    fn protocol_8_3_worked_example() {
        let cache = worked_example();
        assert_eq!(cache.end_offset_for_epoch(2, 9), Some((1, 3)));
        assert_eq!(cache.end_offset_for_epoch(3, 9), Some((3, 6)));
        assert_eq!(cache.end_offset_for_epoch(5, 9), Some((5, 9)));
        assert_eq!(cache.end_offset_for_epoch(7, 9), Some((5, 9)));
        assert_eq!(cache.end_offset_for_epoch(0, 9), None);
    }

    #[test]
    fn truncate_from_drops_entries_at_or_after() {
        let mut cache = worked_example();
        cache.truncate_from(6);
        assert_eq!(cache.entries(), &[(1, 0), (3, 3)]);
        cache.truncate_from(4);
        assert_eq!(cache.entries(), &[(1, 0), (3, 3)]);
        cache.truncate_from(3);
        assert_eq!(cache.entries(), &[(1, 0)]);
        assert_eq!(cache.last_epoch(), 1);
        cache.truncate_from(0);
        assert_eq!(cache.last_epoch(), 0);
    }

    #[test]
    fn assign_rejects_regressions() {
        let mut cache = worked_example();
        assert!(matches!(
            cache.assign(4, 10),
            Err(EpochCacheError::EpochRegression { .. })
        ));
        assert!(matches!(
            cache.assign(6, 5),
            Err(EpochCacheError::OffsetRegression { .. })
        ));
        cache.assign(5, 8).unwrap();
        assert_eq!(cache.entries().len(), 3);
        cache.assign(6, 6).unwrap();
        assert_eq!(cache.entries(), &[(1, 0), (3, 3), (6, 6)]);
    }
}
