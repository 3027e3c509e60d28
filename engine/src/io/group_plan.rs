//! Which io_uring entries make one group durable, and in what order (docs/storage.md, "Group
//! commit"): pure logic, so every choice is tested here; the writer turns a plan into entries
//! (`WriteFixed` or `Write`, `Fsync`) and submits them.
//!
//! - A group of at most `split_bytes` is one write. With [`SyncMode::RwfDsync`] and no
//!   zero-fill due, that write carries RWF_DSYNC and is the whole group. Otherwise an
//!   fdatasync follows, linked (IO_LINK) behind the write and the zero-fill, so it starts only
//!   once they succeeded, and a failed write cancels it.
//! - A larger group is split into parallel writes of `split_bytes` (a block multiple), or more
//!   when that would take over [`MAX_SPLIT_WRITES`] writes. They are not linked (a link chain
//!   runs one entry at a time); the fdatasync is submitted on its own once every write (and the
//!   zero-fill) completed.

use super::writer::SyncMode;
use crate::os::aligned::{align_up, BLOCK};

/// At most this many parallel writes per group (the ring has room for them plus two).
pub const MAX_SPLIT_WRITES: usize = 64;

/// What an entry does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Writes `len` bytes of the group's buffer, from `position - file_offset`.
    Data,
    /// Writes `len` bytes of the log's zero buffer (docs/storage.md, "Zero-fill ahead").
    ZeroFill,
    /// fdatasync of the segment.
    Sync,
}

/// One entry of a group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlannedOp {
    pub step: Step,
    /// File position written (the group's start for the sync).
    pub position: u64,
    /// Bytes written (0 for the sync).
    pub len: usize,
    /// RWF_DSYNC: the write is durable when it completes.
    pub dsync: bool,
    /// IO_LINK: the next entry starts only after this one succeeded.
    pub linked: bool,
}

/// The entries of one group: `first` submitted together, then `then_sync` on its own once all
/// of them completed (a split group's fdatasync).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupPlan {
    pub first: Vec<PlannedOp>,
    pub then_sync: Option<PlannedOp>,
}

impl GroupPlan {
    /// The entries for a group write of `len` bytes at `file_offset` (a block multiple), with
    /// the zero-fill `(position, len)` when one is due.
    pub fn for_write(
        len: usize,
        file_offset: u64,
        zero_fill: Option<(u64, usize)>,
        sync_mode: SyncMode,
        split_bytes: usize,
    ) -> GroupPlan {
        assert!(len > 0 && split_bytes > 0);
        assert_eq!(file_offset % BLOCK as u64, 0, "group at {file_offset}");
        let split = len > split_bytes;
        let dsync = sync_mode == SyncMode::RwfDsync && zero_fill.is_none() && !split;
        let chunk = if split {
            split_bytes.max(align_up(len.div_ceil(MAX_SPLIT_WRITES) as u64) as usize)
        } else {
            len
        };
        let mut first = Vec::with_capacity(len.div_ceil(chunk) + 2);
        let mut done = 0;
        while done < len {
            let step_len = chunk.min(len - done);
            first.push(op(Step::Data, file_offset + done as u64, step_len, dsync));
            done += step_len;
        }
        if dsync {
            return GroupPlan {
                first,
                then_sync: None,
            };
        }
        if let Some((position, len)) = zero_fill {
            first.push(op(Step::ZeroFill, position, len, false));
        }
        let sync = op(Step::Sync, file_offset, 0, false);
        if split {
            return GroupPlan {
                first,
                then_sync: Some(sync),
            };
        }
        for entry in &mut first {
            entry.linked = true;
        }
        first.push(sync);
        GroupPlan {
            first,
            then_sync: None,
        }
    }

    /// Bytes the group writes to the device: its data and its zero-fill.
    pub fn device_bytes(&self) -> u64 {
        self.first.iter().map(|op| op.len as u64).sum()
    }

    /// True when an fdatasync makes the group durable; false when its RWF_DSYNC write alone
    /// does.
    pub fn has_fdatasync(&self) -> bool {
        self.then_sync.is_some() || self.first.iter().any(|op| op.step == Step::Sync)
    }
}

fn op(step: Step, position: u64, len: usize, dsync: bool) -> PlannedOp {
    PlannedOp {
        step,
        position,
        len,
        dsync,
        linked: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPLIT: usize = 512 << 10;

    fn data(position: u64, len: usize, dsync: bool, linked: bool) -> PlannedOp {
        PlannedOp {
            step: Step::Data,
            position,
            len,
            dsync,
            linked,
        }
    }

    fn sync(position: u64, linked: bool) -> PlannedOp {
        PlannedOp {
            step: Step::Sync,
            position,
            len: 0,
            dsync: false,
            linked,
        }
    }

    fn zero_fill(position: u64, len: usize, linked: bool) -> PlannedOp {
        PlannedOp {
            step: Step::ZeroFill,
            position,
            len,
            dsync: false,
            linked,
        }
    }

    #[test]
    fn rwf_dsync_without_zero_fill_is_one_durable_write() {
        let plan = GroupPlan::for_write(8192, 4096, None, SyncMode::RwfDsync, SPLIT);
        assert_eq!(plan.first, vec![data(4096, 8192, true, false)]);
        assert_eq!(plan.then_sync, None);
        assert_eq!(plan.device_bytes(), 8192);
        assert!(!plan.has_fdatasync());
    }

    #[test]
    fn a_linked_fdatasync_follows_the_write() {
        let plan = GroupPlan::for_write(8192, 4096, None, SyncMode::LinkedFdatasync, SPLIT);
        assert_eq!(
            plan.first,
            vec![data(4096, 8192, false, true), sync(4096, false)]
        );
        assert_eq!(plan.then_sync, None);
        assert!(plan.has_fdatasync());
    }

    #[test]
    fn a_zero_fill_goes_between_the_write_and_the_sync_in_either_mode() {
        for mode in [SyncMode::RwfDsync, SyncMode::LinkedFdatasync] {
            let plan = GroupPlan::for_write(8192, 4096, Some((12288, 65536)), mode, SPLIT);
            assert_eq!(
                plan.first,
                vec![
                    data(4096, 8192, false, true),
                    zero_fill(12288, 65536, true),
                    sync(4096, false)
                ],
                "{mode}"
            );
            assert_eq!(plan.then_sync, None);
            assert_eq!(plan.device_bytes(), 8192 + 65536);
            assert!(plan.has_fdatasync(), "{mode}");
        }
    }

    #[test]
    fn a_group_of_exactly_split_bytes_is_not_split() {
        let plan = GroupPlan::for_write(SPLIT, 0, None, SyncMode::RwfDsync, SPLIT);
        assert_eq!(plan.first, vec![data(0, SPLIT, true, false)]);
    }

    #[test]
    fn a_larger_group_is_parallel_writes_then_the_sync_on_its_own() {
        for mode in [SyncMode::RwfDsync, SyncMode::LinkedFdatasync] {
            let len = 2 * SPLIT + 4096;
            let plan =
                GroupPlan::for_write(len, 8192, Some((8192 + len as u64, 4096)), mode, SPLIT);
            assert_eq!(
                plan.first,
                vec![
                    data(8192, SPLIT, false, false),
                    data(8192 + SPLIT as u64, SPLIT, false, false),
                    data(8192 + 2 * SPLIT as u64, 4096, false, false),
                    zero_fill(8192 + len as u64, 4096, false),
                ],
                "{mode}"
            );
            assert_eq!(plan.then_sync, Some(sync(8192, false)));
            assert_eq!(plan.device_bytes(), len as u64 + 4096);
            assert!(plan.has_fdatasync(), "{mode}");
        }
    }

    #[test]
    fn a_split_never_takes_more_than_max_split_writes() {
        // 130 blocks in writes of one block would be 130 writes: each takes ceil(130 / 64) = 3.
        let len = 130 * BLOCK;
        let plan = GroupPlan::for_write(len, 0, None, SyncMode::LinkedFdatasync, BLOCK);
        let lens: Vec<usize> = plan.first.iter().map(|op| op.len).collect();
        assert_eq!(lens, [vec![3 * BLOCK; 43], vec![BLOCK]].concat());
        let positions: Vec<u64> = plan.first.iter().map(|op| op.position).collect();
        let expected: Vec<u64> = (0..44).map(|i| (i * 3 * BLOCK) as u64).collect();
        assert_eq!(positions, expected);
        assert!(plan.first.len() <= MAX_SPLIT_WRITES);
        // The most the bound allows: 64 writes of one block each.
        let plan = GroupPlan::for_write(64 * BLOCK, 0, None, SyncMode::LinkedFdatasync, BLOCK);
        assert_eq!(plan.first.len(), 64);
        assert!(plan.first.iter().all(|op| op.len == BLOCK));
    }
}
