//! Kafka RecordBatch v2 (magic 2), the format of the log on disk and of records on the wire
//! (docs/protocol.md section 13, "Record batches").
//!
//! - [`BatchView`]: one batch in a [`bytes::Bytes`], validated in full (CRC-32C, framing of every
//!   record), read in place; [`BatchView::records`] yields slices of the same buffer.
//! - [`BatchHeader::read`] / [`peek_batch_len`]: cheap header-only checks for scanning a log.
//! - [`BatchIter`]: the batches of a buffer holding several, up to the first bad one.
//! - [`RecordBatchBuilder`]: packs records into one batch, computes the CRC.
//! - [`stamp`]: the leader's overwrite of BaseOffset and PartitionLeaderEpoch (outside the CRC).
//! - [`control`]: LeaderChange and QuorumReassignment control records.
//! - [`varint`]: varint and zigzag helpers, shared with the wire codec.
//!
//! - [`compression`]: gzip, snappy, lz4 and zstd batches are stored as they came; their records
//!   are decompressed (bounded) only to validate and read them.

mod batch;
mod builder;
pub mod compression;
pub mod control;
mod error;
mod header;
mod scan;
pub mod varint;
mod view;
pub mod voters;

pub use batch::Batch;
pub use builder::RecordBatchBuilder;

/// A batch at `base_offset` in epoch 1 with one record per timestamp, each with `value` (for
/// the unit tests of the log and the writer).
#[cfg(test)]
pub(crate) fn batch_for_tests(base_offset: i64, timestamps: &[i64], value: &[u8]) -> bytes::Bytes {
    let mut builder = RecordBatchBuilder::new(base_offset, 1);
    for &timestamp in timestamps {
        builder.append(timestamp, None, Some(value), &[]);
    }
    builder.build().freeze()
}
pub use error::RecordError;
pub use header::*;
pub use scan::{BatchIter, StoredBatchIter};
pub use view::{BatchView, Record, RecordIter, RecordRef, RecordRefIter};
