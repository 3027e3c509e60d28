//! The plain numbers everything is counted in. They stay Kafka's wire types (int32 ids and
//! epochs, int64 offsets); -1 for "none" appears only at the wire edge and in stored formats.

pub type NodeId = i32;
pub type Epoch = i32;
pub type Offset = i64;

/// Milliseconds on the driver's monotonic clock. Only differences matter to the core.
pub type TimeMs = u64;

/// An (offset, epoch) position, ordered by epoch first (docs/protocol.md, Vote: the log
/// up-to-date rule compares (last epoch, log end offset)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OffsetAndEpoch {
    pub offset: Offset,
    pub epoch: Epoch,
}

impl PartialOrd for OffsetAndEpoch {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for OffsetAndEpoch {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.epoch, self.offset).cmp(&(other.epoch, other.offset))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_and_epoch_orders_by_epoch_first() {
        let a = OffsetAndEpoch {
            offset: 100,
            epoch: 1,
        };
        let b = OffsetAndEpoch {
            offset: 5,
            epoch: 2,
        };
        assert!(a < b);
        assert!(
            OffsetAndEpoch {
                offset: 4,
                epoch: 2
            } < b
        );
    }
}
