//! The two places where the core touches the RecordBatch v2 format (engine::record): stamping a
//! client batch and building the LeaderChange control batch.

use bytes::BytesMut;

use crate::record;
use crate::record::control::LeaderChange;

use super::types::{Epoch, NodeId, Offset};

/// The LeaderChange control batch a new leader appends at its epoch start offset.
pub(crate) fn leader_change_batch(
    base_offset: Offset,
    epoch: Epoch,
    leader_id: NodeId,
    voters: &[NodeId],
    granting_voters: &[NodeId],
    timestamp_ms: i64,
) -> BytesMut {
    LeaderChange {
        version: 0,
        leader_id,
        voters: voters.to_vec(),
        granting_voters: granting_voters.to_vec(),
    }
    .to_batch(base_offset, epoch, timestamp_ms)
}

/// The header of `bytes` if it is framed as one whole RecordBatch v2 (what `record::stamp`
/// requires); None otherwise.
pub(crate) fn whole_batch_header(bytes: &[u8]) -> Option<record::BatchHeader> {
    match record::peek_batch_len(bytes) {
        Ok(Some(len)) if len == bytes.len() => record::BatchHeader::read(bytes).ok(),
        _ => None,
    }
}

pub(crate) use record::stamp;
