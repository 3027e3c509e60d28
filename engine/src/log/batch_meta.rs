//! The few facts the log needs about a stored batch, read through [`crate::record`].

use bytes::Bytes;

use crate::base::{Epoch, Offset};
use crate::record::{BatchHeader, BatchView, LOG_OVERHEAD};

pub use crate::record::BATCH_HEADER_LEN;

/// Where a stored batch sits in offset space and how long it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchMeta {
    pub base_offset: Offset,
    pub last_offset: Offset,
    pub epoch: Epoch,
    pub record_count: u32,
    /// Total bytes, header included.
    pub len: usize,
    /// The header's MaxTimestamp as the producer sent it (ringraft never rewrites it): what the
    /// sparse index keeps a running maximum of for timestamp lookups (docs/storage.md).
    pub max_timestamp: i64,
}

impl BatchMeta {
    pub fn next_offset(&self) -> Offset {
        self.last_offset + 1
    }

    fn from_header(header: &BatchHeader) -> Self {
        BatchMeta {
            base_offset: header.base_offset,
            last_offset: header.last_offset(),
            epoch: header.partition_leader_epoch,
            record_count: header.records_count as u32,
            len: header.total_len(),
            max_timestamp: header.max_timestamp,
        }
    }
}

/// What the bytes at a position hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Peek {
    /// Zeros where a batch header would start: the end of the written data.
    End,
    /// Fewer bytes than a header.
    Incomplete,
    /// A header that makes sense (its CRC and records are not checked yet).
    Header(BatchMeta),
    /// A header that cannot be a batch.
    Invalid(String),
}

/// Reads the header at the start of `buf` with record's cheap header check (no CRC).
pub fn peek(buf: &[u8]) -> Peek {
    let zeros = &buf[..buf.len().min(LOG_OVERHEAD)];
    if zeros.iter().all(|&b| b == 0) && (buf.len() >= LOG_OVERHEAD || buf.iter().all(|&b| b == 0)) {
        return Peek::End;
    }
    if buf.len() < BATCH_HEADER_LEN {
        return Peek::Incomplete;
    }
    match BatchHeader::read(buf) {
        Ok(header) if header.base_offset >= 0 => Peek::Header(BatchMeta::from_header(&header)),
        Ok(header) => Peek::Invalid(format!("negative base offset {}", header.base_offset)),
        Err(error) => Peek::Invalid(error.to_string()),
    }
}

/// Fully validates one whole batch: framing, CRC-32C and every record (record::BatchView::parse).
pub fn validate(bytes: &Bytes) -> Result<BatchMeta, String> {
    let view = BatchView::parse(bytes.clone()).map_err(|e| e.to_string())?;
    Ok(BatchMeta::from_header(view.header()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::RecordBatchBuilder;

    /// Where the log ends: a zero offset and length (the first 12 bytes, whatever follows),
    /// or a shorter buffer of nothing but zeros. A short buffer holding anything else is a
    /// header still arriving.
    #[test]
    fn zeros_where_a_header_would_start_end_the_log() {
        assert_eq!(peek(&[0; 100]), Peek::End);
        let mut zero_header = vec![0u8; LOG_OVERHEAD];
        zero_header.extend_from_slice(&[1, 2, 3]);
        assert_eq!(peek(&zero_header), Peek::End);
        assert_eq!(peek(&[0; 5]), Peek::End);
        assert_eq!(peek(&[0, 0, 0, 1]), Peek::Incomplete);
    }

    /// A header whose base offset is negative is not a batch of this log (a torn or foreign
    /// write), whatever else it says: recovery stops there instead of reading on.
    #[test]
    fn a_negative_base_offset_is_invalid() {
        let mut builder = RecordBatchBuilder::new(0, 1);
        builder.append(0, None, Some(b"v"), &[]);
        let mut bytes = builder.build();
        assert!(matches!(peek(&bytes), Peek::Header(meta) if meta.base_offset == 0));
        bytes[..8].copy_from_slice(&(-1i64).to_be_bytes());
        match peek(&bytes) {
            Peek::Invalid(reason) => {
                assert!(reason.contains("negative base offset -1"), "{reason}")
            }
            other => panic!("{other:?}"),
        }
    }
}
