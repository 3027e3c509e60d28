//! A batch as the log and the core pass it around: the bytes of one RecordBatch v2 with the
//! header fields they need lifted out.

use bytes::Bytes;

use crate::base::{Epoch, Offset};

/// One Kafka RecordBatch v2, with the header fields the core needs lifted out.
///
/// `bytes` is the whole encoded batch; its header's BaseOffset and PartitionLeaderEpoch equal
/// `base_offset` and `epoch` (neither is covered by the CRC, so the leader can stamp them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Batch {
    pub base_offset: Offset,
    pub epoch: Epoch,
    /// Number of records; the batch covers `base_offset .. base_offset + record_count`.
    pub record_count: u32,
    /// True for control batches (LeaderChange, reassignment): replicated, never handed out as data.
    pub is_control: bool,
    pub bytes: Bytes,
}

/// The encoded batch, as the log stages it.
impl AsRef<[u8]> for Batch {
    fn as_ref(&self) -> &[u8] {
        &self.bytes
    }
}

impl Batch {
    /// One past the last offset of the batch.
    pub fn end_offset(&self) -> Offset {
        self.base_offset + i64::from(self.record_count)
    }
}
