//! The few facts the log needs about a stored batch, read through `engine::record`.
//!
//! INTERIM: until `engine::record` lands, this reads the fixed header fields directly. It is the
//! only place the log looks inside a batch, and it is replaced by record's parser when that merges.

use bytes::Bytes;

use crate::raft::{Epoch, Offset};

/// Size of the RecordBatch v2 header (protocol.md 19).
pub const BATCH_HEADER_LEN: usize = 61;
/// BaseOffset + BatchLength: the part of the header not counted by BatchLength.
pub const LOG_OVERHEAD: usize = 12;

/// Where a stored batch sits in offset space and how long it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchMeta {
    pub base_offset: Offset,
    pub last_offset: Offset,
    pub epoch: Epoch,
    pub record_count: u32,
    /// Total bytes, header included.
    pub len: usize,
}

impl BatchMeta {
    pub fn next_offset(&self) -> Offset {
        self.last_offset + 1
    }
}

/// What the bytes at a position hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Peek {
    /// Zeros where a batch header would start: the end of the written data.
    End,
    /// Fewer bytes than a header (or than the batch the header announces).
    Incomplete,
    /// A header that makes sense (its CRC is not checked yet).
    Header(BatchMeta),
    /// A header that cannot be a batch.
    Invalid(String),
}

/// Reads the header at the start of `buf` without checking the CRC.
pub fn peek(buf: &[u8]) -> Peek {
    if buf.len() >= LOG_OVERHEAD && buf[..LOG_OVERHEAD].iter().all(|&b| b == 0) {
        return Peek::End;
    }
    if buf.len() < BATCH_HEADER_LEN {
        return if buf.iter().all(|&b| b == 0) {
            Peek::End
        } else {
            Peek::Incomplete
        };
    }
    match header(buf) {
        Ok(meta) => Peek::Header(meta),
        Err(reason) => Peek::Invalid(reason),
    }
}

fn i32_at(buf: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(buf[at..at + 4].try_into().expect("4 bytes"))
}

fn header(buf: &[u8]) -> Result<BatchMeta, String> {
    let base_offset = i64::from_be_bytes(buf[0..8].try_into().expect("8 bytes"));
    let batch_length = i32_at(buf, 8);
    let epoch = i32_at(buf, 12);
    let magic = buf[16];
    let last_offset_delta = i32_at(buf, 23);
    let record_count = i32_at(buf, 57);
    if magic != 2 {
        return Err(format!("magic {magic}, expected 2"));
    }
    if batch_length < (BATCH_HEADER_LEN - LOG_OVERHEAD) as i32 {
        return Err(format!("batch length {batch_length} below the header size"));
    }
    if base_offset < 0 || last_offset_delta < 0 || record_count < 0 {
        return Err("negative offset or record count".into());
    }
    Ok(BatchMeta {
        base_offset,
        last_offset: base_offset + i64::from(last_offset_delta),
        epoch,
        record_count: record_count as u32,
        len: LOG_OVERHEAD + batch_length as usize,
    })
}

/// Fully validates one whole batch (header and CRC-32C).
pub fn validate(bytes: &Bytes) -> Result<BatchMeta, String> {
    let meta = match peek(bytes) {
        Peek::Header(meta) => meta,
        Peek::End => return Err("zeros where a batch should start".into()),
        Peek::Incomplete => return Err("shorter than a batch header".into()),
        Peek::Invalid(reason) => return Err(reason),
    };
    if meta.len != bytes.len() {
        return Err(format!(
            "batch length {} but {} bytes",
            meta.len,
            bytes.len()
        ));
    }
    let stored = u32::from_be_bytes(bytes[17..21].try_into().expect("4 bytes"));
    let computed = crc32c::crc32c(&bytes[21..]);
    if stored != computed {
        return Err(format!(
            "CRC-32C {stored:#010x} does not match the contents ({computed:#010x})"
        ));
    }
    Ok(meta)
}
