//! The core's in-memory leader-epoch cache: (epoch, start offset) pairs, ascending in both.
//! It answers `end_offset_for_epoch`, the leader's divergence check (protocol.md 8.3) and the
//! follower's truncation point (8.5).

use super::types::{Epoch, Offset, OffsetAndEpoch};

#[derive(Clone, Debug, Default)]
pub(crate) struct EpochCache {
    entries: Vec<(Epoch, Offset)>,
}

impl EpochCache {
    pub(crate) fn new(entries: Vec<(Epoch, Offset)>) -> Self {
        assert!(
            entries
                .windows(2)
                .all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1),
            "epoch cache must ascend in epoch and offset"
        );
        Self { entries }
    }

    /// Epoch of the last batch in the log (0 for an empty log).
    pub(crate) fn last_epoch(&self) -> Epoch {
        self.entries.last().map_or(0, |e| e.0)
    }

    /// Records that batches of `epoch` start at `start` (no-op if `epoch` is already the latest).
    pub(crate) fn assign(&mut self, epoch: Epoch, start: Offset) {
        match self.entries.last() {
            Some(&(last, _)) if last == epoch => {}
            Some(&(last, last_start)) => {
                assert!(epoch > last, "epoch {epoch} appended after epoch {last}");
                assert!(start >= last_start);
                self.entries.push((epoch, start));
            }
            None => self.entries.push((epoch, start)),
        }
    }

    /// Drops every entry whose epoch starts at or beyond `offset`.
    pub(crate) fn truncate_to(&mut self, offset: Offset) {
        while self.entries.last().is_some_and(|e| e.1 >= offset) {
            self.entries.pop();
        }
    }

    /// The largest cached epoch `<= epoch` with its end offset (start of the next epoch, or
    /// `log_end` for the latest); None when no cached epoch is `<= epoch`.
    pub(crate) fn end_offset_for_epoch(
        &self,
        epoch: Epoch,
        log_end: Offset,
    ) -> Option<(Epoch, Offset)> {
        let idx = self.entries.partition_point(|e| e.0 <= epoch);
        if idx == 0 {
            return None;
        }
        let (found, _) = self.entries[idx - 1];
        let end = self.entries.get(idx).map_or(log_end, |next| next.1);
        Some((found, end))
    }

    /// Leader side (8.3): the truncation point for a fetch at (`fetch_offset`, `last_epoch`),
    /// or None when the requester's log is consistent with ours.
    pub(crate) fn divergence(
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
            // a value that could read as "no divergence", pitfall 23.9).
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

    /// Follower side (8.5): where to truncate given the leader's (offset, epoch).
    pub(crate) fn truncation_point(&self, leader: OffsetAndEpoch, log_end: Offset) -> Offset {
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

    fn leader_cache() -> EpochCache {
        // protocol.md 8.3 example: epoch 1 at 0-2, epoch 3 at 3-5, epoch 5 at 6-8.
        EpochCache::new(vec![(1, 0), (3, 3), (5, 6)])
    }

    #[test]
    fn end_offset_for_epoch_picks_largest_epoch_not_above() {
        let c = leader_cache();
        assert_eq!(c.end_offset_for_epoch(2, 9), Some((1, 3)));
        assert_eq!(c.end_offset_for_epoch(5, 9), Some((5, 9)));
        assert_eq!(c.end_offset_for_epoch(0, 9), None);
    }

    #[test]
    fn divergence_matches_worked_example() {
        let c = leader_cache();
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
        let local = EpochCache::new(vec![(1, 0), (3, 3)]);
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
            c.assign(*epoch, offset as Offset);
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
