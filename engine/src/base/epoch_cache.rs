//! The leader-epoch cache: which epoch's leader appended which offsets. One cache, one set of
//! operations: the log persists it (checkpointed with the recovery point), the core asks it
//! where a follower's log diverges and where to truncate (docs/protocol.md, FetchQuorumRecords),
//! and the simulator's disk and the tests build theirs with it.

use super::ids::{Epoch, Offset, OffsetAndEpoch};

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

    /// The epoch whose leader appended `offset`: the last entry starting at or before it (for an
    /// offset at the log end, the latest epoch). None before the first entry.
    pub fn epoch_at(&self, offset: Offset) -> Option<Epoch> {
        let index = self.entries.partition_point(|&(_, start)| start <= offset);
        index.checked_sub(1).map(|i| self.entries[i].0)
    }

    /// Drops every entry starting at or beyond `offset` (the log is truncated to `offset`).
    pub fn truncate_to(&mut self, offset: Offset) {
        let keep = self.entries.partition_point(|&(_, start)| start < offset);
        self.entries.truncate(keep);
    }

    /// The log now starts at `start` (segments left its front): drops the entries wholly below
    /// it and moves the one that covers it up to `start`, so the cache describes only offsets
    /// the log holds and stays bounded by the epochs in it.
    pub fn trim_front(&mut self, start: Offset) {
        let covering = self.entries.partition_point(|&(_, s)| s <= start);
        if covering == 0 {
            return;
        }
        self.entries.drain(..covering - 1);
        self.entries[0].1 = start;
    }

    /// Keeps only entries that start before `offset` (what a checkpoint at `offset` may claim).
    pub fn entries_before(&self, offset: Offset) -> Vec<(Epoch, Offset)> {
        self.entries
            .iter()
            .copied()
            .filter(|&(_, start)| start < offset)
            .collect()
    }

    /// Leader side: the truncation point for a fetch at (`fetch_offset`, `last_epoch`),
    /// or None when the requester's log is consistent with ours.
    pub fn divergence(
        &self,
        fetch_offset: Offset,
        last_epoch: Epoch,
        log_end: Offset,
    ) -> Option<OffsetAndEpoch> {
        if fetch_offset == 0 && last_epoch == 0 {
            return None;
        }
        match self.end_offset_for_epoch(last_epoch, log_end) {
            // We never had an epoch this old: the requester must drop everything (never answer
            // a value that could read as "no divergence").
            None => Some(OffsetAndEpoch {
                offset: 0,
                epoch: 0,
            }),
            Some((found, end)) if found != last_epoch || end < fetch_offset => {
                Some(OffsetAndEpoch {
                    offset: end,
                    epoch: found,
                })
            }
            Some(_) => None,
        }
    }

    /// Follower side: where to truncate given the leader's (offset, epoch).
    pub fn truncation_point(&self, leader: OffsetAndEpoch, log_end: Offset) -> Offset {
        let point = if leader.epoch == 0 {
            leader.offset
        } else {
            match self.end_offset_for_epoch(leader.epoch, log_end) {
                Some((found, end)) if found == leader.epoch => end.min(leader.offset),
                Some((_, end)) => end,
                None => 0,
            }
        };
        point.clamp(0, log_end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn worked_example() -> EpochCache {
        EpochCache::from_entries(&[(1, 0), (3, 3), (5, 6)]).unwrap()
    }

    #[test]
    fn end_offset_for_epoch_of_the_worked_example() {
        let cache = worked_example();
        assert_eq!(cache.end_offset_for_epoch(2, 9), Some((1, 3)));
        assert_eq!(cache.end_offset_for_epoch(3, 9), Some((3, 6)));
        assert_eq!(cache.end_offset_for_epoch(5, 9), Some((5, 9)));
        assert_eq!(cache.end_offset_for_epoch(7, 9), Some((5, 9)));
        assert_eq!(cache.end_offset_for_epoch(0, 9), None);
    }

    #[test]
    fn epoch_at_of_the_worked_example() {
        let cache = worked_example();
        assert_eq!(cache.epoch_at(0), Some(1));
        assert_eq!(cache.epoch_at(2), Some(1));
        assert_eq!(cache.epoch_at(3), Some(3));
        assert_eq!(cache.epoch_at(6), Some(5));
        assert_eq!(cache.epoch_at(100), Some(5));
        assert_eq!(cache.epoch_at(-1), None);
        let late = EpochCache::from_entries(&[(2, 4)]).unwrap();
        assert_eq!(late.epoch_at(3), None);
        assert_eq!(EpochCache::new().epoch_at(0), None);
    }

    #[test]
    fn trim_front_keeps_the_epoch_that_covers_the_new_start() {
        let mut cache = worked_example();
        let before = cache.clone();
        // Before the first entry, or at it: nothing changes.
        cache.trim_front(0);
        assert_eq!(cache, before);
        // Inside epoch 3's range: epoch 1 goes, epoch 3 now starts at the log start.
        cache.trim_front(4);
        assert_eq!(cache.entries()[0], (3, 4));
        assert_eq!(cache.entries()[1..], before.entries()[2..]);
        assert_eq!(cache.epoch_at(4), Some(3));
        // Exactly at a later entry's start: that entry is the first.
        let start = before.entries()[2].1;
        cache.trim_front(start);
        assert_eq!(cache.entries(), &before.entries()[2..]);
        // Past the last entry: the last epoch stays, starting at the log start.
        cache.trim_front(1_000);
        assert_eq!(cache.entries(), &[(before.last_epoch(), 1_000)]);
        assert_eq!(cache.last_epoch(), before.last_epoch());
    }

    #[test]
    fn truncate_to_drops_entries_at_or_after() {
        let mut cache = worked_example();
        cache.truncate_to(6);
        assert_eq!(cache.entries(), &[(1, 0), (3, 3)]);
        cache.truncate_to(4);
        assert_eq!(cache.entries(), &[(1, 0), (3, 3)]);
        cache.truncate_to(3);
        assert_eq!(cache.entries(), &[(1, 0)]);
        assert_eq!(cache.last_epoch(), 1);
        cache.truncate_to(0);
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

    #[test]
    fn divergence_matches_worked_example() {
        let c = worked_example();
        assert_eq!(
            c.divergence(6, 2, 9),
            Some(OffsetAndEpoch {
                offset: 3,
                epoch: 1
            })
        );
        assert_eq!(
            c.divergence(7, 3, 9),
            Some(OffsetAndEpoch {
                offset: 6,
                epoch: 3
            })
        );
        assert_eq!(c.divergence(5, 3, 9), None);
        assert_eq!(c.divergence(0, 0, 9), None);
        assert_eq!(
            c.divergence(2, 0, 9),
            Some(OffsetAndEpoch {
                offset: 0,
                epoch: 0
            })
        );
    }

    #[test]
    fn truncation_point_rules() {
        let local = EpochCache::from_entries(&[(1, 0), (3, 3)]).unwrap();
        // Leader knows epoch 3 ended at 5: truncate to min(local end 7, 5).
        assert_eq!(
            local.truncation_point(
                OffsetAndEpoch {
                    offset: 5,
                    epoch: 3
                },
                7
            ),
            5
        );
        // Leader says epoch 2 (we lack it): end of our epoch before it = 3.
        assert_eq!(
            local.truncation_point(
                OffsetAndEpoch {
                    offset: 4,
                    epoch: 2
                },
                7
            ),
            3
        );
        assert_eq!(
            local.truncation_point(
                OffsetAndEpoch {
                    offset: 0,
                    epoch: 0
                },
                7
            ),
            0
        );
        let mut t = local.clone();
        t.truncate_to(3);
        assert_eq!(t.last_epoch(), 1);
    }
}

#[cfg(test)]
mod props {
    use super::*;
    use proptest::prelude::*;

    /// Epoch cache of a log given as one epoch per offset (non-decreasing).
    fn cache_of(log: &[Epoch]) -> EpochCache {
        let mut c = EpochCache::default();
        for (offset, epoch) in log.iter().enumerate() {
            c.assign(*epoch, offset as Offset).unwrap();
        }
        c
    }

    /// Two logs obeying log matching: a common prefix, then suffixes written in disjoint epochs
    /// (follower: odd, leader: even, all newer than the prefix). One side (never both) may first
    /// extend the prefix's last epoch: the old leader of that epoch reached it but not the other.
    /// The leader's log ends in its own, newest epoch.
    fn logs() -> impl Strategy<Value = (Vec<Epoch>, Vec<Epoch>, usize)> {
        (
            proptest::collection::vec(1..4i32, 0..12),
            proptest::collection::vec(0..4i32, 0..12),
            proptest::collection::vec(0..4i32, 0..12),
            (0..4usize, any::<bool>(), any::<bool>()),
        )
            .prop_map(|(p, f, l, (extend, leader_extends, follower_low))| {
                let mut prefix: Vec<Epoch> = Vec::new();
                let mut e = 1;
                for step in p {
                    e += step / 3; // mostly the same epoch, sometimes the next
                    prefix.push(e);
                }
                let last = prefix.last().copied().unwrap_or(0);
                let base = 2 * last + 2;
                let mut follower = prefix.clone();
                let mut leader = prefix.clone();
                if !prefix.is_empty() {
                    let side = if leader_extends {
                        &mut leader
                    } else {
                        &mut follower
                    };
                    side.extend(std::iter::repeat_n(last, extend));
                }
                let mut fe = if follower_low { base - 1 } else { base + 1 };
                for step in f {
                    follower.push(fe);
                    fe += 2 * (step / 3);
                }
                let mut le = base;
                for step in l {
                    leader.push(le);
                    le += 2 * (step / 3);
                }
                let newest = leader
                    .iter()
                    .chain(follower.iter())
                    .max()
                    .copied()
                    .unwrap_or(0);
                leader.push(newest + 1);
                (leader, follower, prefix.len())
            })
    }

    proptest! {
        #[test]
        fn divergence_rounds_converge_without_cutting_the_common_prefix((leader, mut follower, common) in logs()) {
            let lc = cache_of(&leader);
            for _round in 0..64 {
                let fc = cache_of(&follower);
                let leo = follower.len() as Offset;
                let last = fc.last_epoch();
                match lc.divergence(leo, last, leader.len() as Offset) {
                    None => {
                        prop_assert!(follower.len() <= leader.len());
                        prop_assert_eq!(&follower[..], &leader[..follower.len()]);
                        return Ok(());
                    }
                    Some(point) => {
                        prop_assert!(point.epoch >= 0);
                        let to = fc.truncation_point(point, leo);
                        prop_assert!(to as usize >= common.min(follower.len()),
                            "truncated to {} inside the common prefix {}", to, common);
                        prop_assert!(to < leo, "no progress at {}", to);
                        follower.truncate(to as usize);
                    }
                }
            }
            prop_assert!(false, "did not converge");
        }
    }
}
