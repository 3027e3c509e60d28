//! Producer ids that no two leaders ever hand out twice, with no log write (docs/protocol.md,
//! "Idempotent producers"): id = Raft epoch << 32 | a counter of the ids handed out in that
//! epoch. Only the leader of an epoch allocates, an epoch has at most one leader, and a node
//! never leads the same epoch twice (a restarted former leader comes back resigned), so the
//! counter may live in memory and start from 0 whenever this node becomes leader.

use crate::base::Epoch;

/// The producer epoch every fresh producer id starts with.
pub const FIRST_PRODUCER_EPOCH: i16 = 0;

/// Why no producer id could be handed out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProducerIdError {
    /// 2^32 ids were handed out in this epoch; the next leader (a new epoch) has a fresh range.
    #[error("every producer id of epoch {epoch} was handed out")]
    Exhausted { epoch: Epoch },
    /// Epochs start at 1 and never go back; anything else is a caller's bug, refused.
    #[error("epoch {epoch} cannot allocate producer ids (the last one used was {last})")]
    BadEpoch { epoch: Epoch, last: Epoch },
}

/// The leader's allocator. Call [`ProducerIds::allocate`] only while leader of `epoch`.
#[derive(Clone, Debug, Default)]
pub struct ProducerIds {
    epoch: Epoch,
    /// Ids already handed out in `epoch`.
    handed_out: u64,
}

impl ProducerIds {
    /// A fresh (producer id, producer epoch 0) in leader epoch `epoch`.
    pub fn allocate(&mut self, epoch: Epoch) -> Result<(i64, i16), ProducerIdError> {
        if epoch <= 0 || epoch < self.epoch {
            return Err(ProducerIdError::BadEpoch {
                epoch,
                last: self.epoch,
            });
        }
        if epoch > self.epoch {
            self.epoch = epoch;
            self.handed_out = 0;
        }
        if self.handed_out > u64::from(u32::MAX) {
            return Err(ProducerIdError::Exhausted { epoch });
        }
        let id = (i64::from(epoch) << 32) | self.handed_out as i64;
        self.handed_out += 1;
        Ok((id, FIRST_PRODUCER_EPOCH))
    }

    /// The leader epoch a producer id was handed out in.
    pub fn epoch_of(producer_id: i64) -> Epoch {
        (producer_id >> 32) as Epoch
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_count_up_within_an_epoch_and_restart_in_the_next() {
        let mut ids = ProducerIds::default();
        assert_eq!(ids.allocate(3), Ok((3 << 32, 0)));
        assert_eq!(ids.allocate(3), Ok(((3 << 32) | 1, 0)));
        assert_eq!(ids.allocate(4), Ok((4 << 32, 0)));
        assert_eq!(ProducerIds::epoch_of((4 << 32) | 77), 4);
    }

    #[test]
    fn an_older_or_non_positive_epoch_is_refused() {
        let mut ids = ProducerIds::default();
        assert!(matches!(
            ids.allocate(0),
            Err(ProducerIdError::BadEpoch { .. })
        ));
        ids.allocate(5).unwrap();
        assert_eq!(
            ids.allocate(4),
            Err(ProducerIdError::BadEpoch { epoch: 4, last: 5 })
        );
    }

    #[test]
    fn the_counter_runs_out_after_two_to_the_32_ids() {
        let mut ids = ProducerIds {
            epoch: 9,
            handed_out: u64::from(u32::MAX),
        };
        assert_eq!(ids.allocate(9), Ok(((9 << 32) | 0xFFFF_FFFF, 0)));
        assert_eq!(
            ids.allocate(9),
            Err(ProducerIdError::Exhausted { epoch: 9 })
        );
        // The largest epoch still gives non-negative ids.
        let (id, _) = ProducerIds::default().allocate(Epoch::MAX).unwrap();
        assert!(id > 0);
    }
}
