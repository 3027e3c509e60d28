//! Why a record batch (or a control record inside one) was rejected.
//!
//! Every variant carries the byte offset (from the start of the batch) or the record index an
//! operator needs to find the damage with `ringraft dump-log` or a hex dump.

use thiserror::Error;

use super::varint::VarintError;

#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum RecordError {
    /// Fewer bytes than the structure being read needs (a header, or the batch its header
    /// declares).
    #[error("record batch too short: {available} bytes, need {needed}")]
    TooShort { available: usize, needed: usize },
    /// BatchLength is outside the sane bounds, or disagrees with the bytes given.
    #[error("bad BatchLength {batch_length} (batch size {declared_size}): {reason}")]
    BadLength {
        batch_length: i32,
        declared_size: i64,
        reason: &'static str,
    },
    #[error("bad magic {magic} at byte 16 (only RecordBatch v2, magic 2, is supported)")]
    BadMagic { magic: i8 },
    /// The CRC stored in the header (`expected`) differs from the CRC-32C of bytes 21..end.
    #[error("CRC mismatch: header says {expected:#010x}, bytes 21..{end} hash to {actual:#010x}")]
    CrcMismatch {
        expected: u32,
        actual: u32,
        end: usize,
    },
    #[error("unknown compression codec {codec} (attributes {attributes:#06x}; 0-4 exist)")]
    UnsupportedCompression { attributes: i16, codec: u8 },
    /// The records of a compressed batch do not decompress.
    #[error("the {codec} records do not decompress: {reason}")]
    Decompression { codec: &'static str, reason: String },
    /// The records of a compressed batch decompressed but are malformed; positions in `source`
    /// count from the start of the decompressed records.
    #[error("in the decompressed {codec} records: {source}")]
    InCompressedRecords {
        codec: &'static str,
        source: Box<RecordError>,
    },
    /// The records of a compressed batch decompress to more than the largest batch.
    #[error("the {codec} records decompress to more than {limit} bytes")]
    DecompressedTooLarge { codec: &'static str, limit: usize },
    /// RecordsCount must be at least 1 and equal LastOffsetDelta + 1.
    #[error("RecordsCount {records_count} does not match LastOffsetDelta {last_offset_delta}")]
    RecordCountMismatch {
        records_count: i32,
        last_offset_delta: i32,
    },
    /// Records must carry offset deltas 0, 1, ..., count - 1 in order.
    #[error("record {record} at byte {offset} has offset delta {actual}, expected {expected}")]
    BadOffsetDelta {
        record: u32,
        offset: usize,
        expected: i32,
        actual: i32,
    },
    #[error("varint truncated at byte {offset}")]
    TruncatedVarint { offset: usize },
    #[error("varint at byte {offset} is too long or out of range")]
    VarintOverflow { offset: usize },
    /// A record's declared Length is negative or runs past the end of the batch.
    #[error(
        "record {record} at byte {offset} has Length {length}, {available} bytes left in batch"
    )]
    BadRecordLength {
        record: u32,
        offset: usize,
        length: i32,
        available: usize,
    },
    /// A field of a record (key, value, header) runs past the end of its record.
    #[error(
        "record {record}: field at byte {offset} needs {needed} bytes, {available} left in record"
    )]
    RecordOverrun {
        record: u32,
        offset: usize,
        needed: usize,
        available: usize,
    },
    /// A key, value, header key or header count length below its allowed minimum.
    #[error("record {record}: {field} length {length} at byte {offset} is invalid")]
    BadFieldLength {
        record: u32,
        offset: usize,
        field: &'static str,
        length: i32,
    },
    /// The record's fields end before its declared Length does.
    #[error("record {record} at byte {offset}: Length says {declared} bytes, fields use {used}")]
    RecordLengthMismatch {
        record: u32,
        offset: usize,
        declared: usize,
        used: usize,
    },
    #[error("record {record}: header key at byte {offset} is not UTF-8")]
    BadHeaderKey { record: u32, offset: usize },
    /// Bytes after the last record, inside BatchLength.
    #[error("{extra} bytes after the last record, from byte {offset}")]
    TrailingBytes { offset: usize, extra: usize },
    /// A control-record decoder was given a data batch.
    #[error("batch at offset {base_offset} is not a control batch")]
    NotControlBatch { base_offset: i64 },
    #[error("control record {record}: bad key ({reason})")]
    BadControlKey { record: u32, reason: &'static str },
    #[error("control record {record}: type {actual}, expected {expected}")]
    UnexpectedControlType {
        record: u32,
        expected: i16,
        actual: i16,
    },
    #[error("control batch holds {count} records, expected {expected}")]
    ControlRecordCount { count: u32, expected: u32 },
    /// A control record's value does not decode; `offset` is within the value.
    #[error(
        "control record type {control_type}: bad value at byte {offset} of the value: {reason}"
    )]
    BadControlValue {
        control_type: i16,
        offset: usize,
        reason: &'static str,
    },
}

impl RecordError {
    /// True when the bytes end before the batch does: a torn write at the end of a log, or a
    /// fetch response cut at its byte limit, rather than damage to bytes that are present.
    pub fn is_incomplete(&self) -> bool {
        matches!(self, Self::TooShort { .. })
    }

    /// Lifts a varint error at `offset` (from the batch start) into a batch error.
    pub fn varint_at(error: VarintError, offset: usize) -> Self {
        match error {
            VarintError::Truncated { read } => Self::TruncatedVarint {
                offset: offset + read,
            },
            VarintError::Overflow { .. } => Self::VarintOverflow { offset },
        }
    }
}
