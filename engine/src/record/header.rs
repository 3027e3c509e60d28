//! The 61-byte RecordBatch v2 header (docs/protocol.md section 13, "Record batches"): layout,
//! bounds checks, stamping.

use zerocopy::byteorder::big_endian::{I16, I32, I64, U32};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use super::error::RecordError;

pub const BASE_OFFSET_OFFSET: usize = 0;
pub const BATCH_LENGTH_OFFSET: usize = 8;
pub const PARTITION_LEADER_EPOCH_OFFSET: usize = 12;
pub const MAGIC_OFFSET: usize = 16;
pub const CRC_OFFSET: usize = 17;
pub const ATTRIBUTES_OFFSET: usize = 21;
pub const LAST_OFFSET_DELTA_OFFSET: usize = 23;
pub const BASE_TIMESTAMP_OFFSET: usize = 27;
pub const MAX_TIMESTAMP_OFFSET: usize = 35;
pub const PRODUCER_ID_OFFSET: usize = 43;
pub const PRODUCER_EPOCH_OFFSET: usize = 51;
pub const BASE_SEQUENCE_OFFSET: usize = 53;
pub const RECORDS_COUNT_OFFSET: usize = 57;
pub const RECORDS_OFFSET: usize = 61;
pub const BATCH_HEADER_LEN: usize = 61;
/// The CRC covers everything from Attributes to the end of the batch.
pub const CRC_START: usize = ATTRIBUTES_OFFSET;
/// BaseOffset + BatchLength: the bytes BatchLength does not count.
pub const LOG_OVERHEAD: usize = 12;
pub const MAGIC: i8 = 2;

/// The smallest record: Length, Attributes, TimestampDelta, OffsetDelta, KeyLength, ValueLength
/// and HeadersCount, one byte each.
pub const MIN_RECORD_LEN: usize = 7;
/// The largest batch accepted anywhere. Larger than Kafka's 100 MiB frame limit, so any batch a
/// client can send fits; a BatchLength beyond it is taken as corruption (a torn or garbage header).
pub const MAX_BATCH_SIZE: usize = 128 << 20;

pub const ATTR_COMPRESSION_MASK: i16 = 0x07;
pub const ATTR_TIMESTAMP_TYPE: i16 = 1 << 3;
pub const ATTR_TRANSACTIONAL: i16 = 1 << 4;
pub const ATTR_CONTROL: i16 = 1 << 5;
// Bit 6 (a delete horizon in BaseTimestamp) is set only by Kafka's log cleaner, which has no
// counterpart here: a batch carrying it is stored and served as it came.

/// The header as it lies in memory: big-endian fields at their offsets, no padding.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct RawBatchHeader {
    pub base_offset: I64,
    pub batch_length: I32,
    pub partition_leader_epoch: I32,
    pub magic: i8,
    pub crc: U32,
    pub attributes: I16,
    pub last_offset_delta: I32,
    pub base_timestamp: I64,
    pub max_timestamp: I64,
    pub producer_id: I64,
    pub producer_epoch: I16,
    pub base_sequence: I32,
    pub records_count: I32,
}

const _: () = assert!(size_of::<RawBatchHeader>() == BATCH_HEADER_LEN);

/// The header's fields, decoded. Obtained with [`BatchHeader::read`], which checks magic,
/// BatchLength bounds and the record count, but not the CRC nor the records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: i64,
    pub batch_length: i32,
    pub partition_leader_epoch: i32,
    pub magic: i8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub records_count: i32,
}

impl BatchHeader {
    /// Decodes and sanity-checks the header at the start of `buf` (which may hold less than the
    /// whole batch): magic 2, BatchLength within bounds, RecordsCount = LastOffsetDelta + 1 >= 1.
    pub fn read(buf: &[u8]) -> Result<BatchHeader, RecordError> {
        let header = Self::read_framing(buf)?;
        header.check_records_count()?;
        Ok(header)
    }

    /// Checks only what locates the batch (magic, BatchLength). [`BatchView::parse`] checks the
    /// CRC next and the count after it, so damage inside the CRC's span reports as a CRC mismatch.
    ///
    /// [`BatchView::parse`]: super::BatchView::parse
    pub(super) fn read_framing(buf: &[u8]) -> Result<BatchHeader, RecordError> {
        let (raw, _) = RawBatchHeader::ref_from_prefix(buf).map_err(|_| RecordError::TooShort {
            available: buf.len(),
            needed: BATCH_HEADER_LEN,
        })?;
        let header = BatchHeader::from_raw(raw);
        check_magic(header.magic)?;
        check_batch_length(header.batch_length)?;
        Ok(header)
    }

    fn from_raw(raw: &RawBatchHeader) -> BatchHeader {
        BatchHeader {
            base_offset: raw.base_offset.get(),
            batch_length: raw.batch_length.get(),
            partition_leader_epoch: raw.partition_leader_epoch.get(),
            magic: raw.magic,
            crc: raw.crc.get(),
            attributes: raw.attributes.get(),
            last_offset_delta: raw.last_offset_delta.get(),
            base_timestamp: raw.base_timestamp.get(),
            max_timestamp: raw.max_timestamp.get(),
            producer_id: raw.producer_id.get(),
            producer_epoch: raw.producer_epoch.get(),
            base_sequence: raw.base_sequence.get(),
            records_count: raw.records_count.get(),
        }
    }

    pub(super) fn check_records_count(&self) -> Result<(), RecordError> {
        let mismatch = RecordError::RecordCountMismatch {
            records_count: self.records_count,
            last_offset_delta: self.last_offset_delta,
        };
        if self.records_count < 1
            || i64::from(self.records_count) != i64::from(self.last_offset_delta) + 1
        {
            return Err(mismatch);
        }
        // Each record takes at least MIN_RECORD_LEN bytes: a count the length cannot hold is
        // corruption, caught here before anyone loops over it. Not for a compressed batch: its
        // records can take far less than that (100 short values zstd-compress into a few
        // hundred bytes); `BatchView::parse` bounds its count by the decompressed length.
        let records_bytes = self.total_len() - BATCH_HEADER_LEN;
        let compressed = self.attributes & ATTR_COMPRESSION_MASK != 0;
        if !compressed && self.records_count as usize > records_bytes / MIN_RECORD_LEN {
            return Err(mismatch);
        }
        Ok(())
    }

    /// Size of the whole batch in bytes (BatchLength + 12).
    pub fn total_len(&self) -> usize {
        assert!(self.batch_length >= 0);
        self.batch_length as usize + LOG_OVERHEAD
    }

    pub fn last_offset(&self) -> i64 {
        self.base_offset + i64::from(self.last_offset_delta)
    }

    /// One past the last offset.
    pub fn next_offset(&self) -> i64 {
        self.last_offset() + 1
    }

    pub fn is_control(&self) -> bool {
        self.attributes & ATTR_CONTROL != 0
    }

    pub fn is_transactional(&self) -> bool {
        self.attributes & ATTR_TRANSACTIONAL != 0
    }

    /// True when timestamps are the broker's log-append time rather than the producer's.
    pub fn is_log_append_time(&self) -> bool {
        self.attributes & ATTR_TIMESTAMP_TYPE != 0
    }

    /// Compression codec: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd.
    pub fn compression(&self) -> u8 {
        (self.attributes & ATTR_COMPRESSION_MASK) as u8
    }
}

fn check_magic(magic: i8) -> Result<(), RecordError> {
    if magic != MAGIC {
        return Err(RecordError::BadMagic { magic });
    }
    Ok(())
}

fn check_batch_length(batch_length: i32) -> Result<(), RecordError> {
    let declared_size = i64::from(batch_length) + LOG_OVERHEAD as i64;
    let reason = if declared_size < (BATCH_HEADER_LEN + MIN_RECORD_LEN) as i64 {
        "smaller than a header and one record"
    } else if declared_size > MAX_BATCH_SIZE as i64 {
        "larger than MAX_BATCH_SIZE"
    } else {
        return Ok(());
    };
    Err(RecordError::BadLength {
        batch_length,
        declared_size,
        reason,
    })
}

/// The total size of the batch starting at `buf[0]`, from its BatchLength, for scanning a log or
/// a stream batch by batch. `Ok(None)` when fewer than 12 bytes are present. When the magic byte
/// is present it is checked too, so a scan stops at garbage early.
pub fn peek_batch_len(buf: &[u8]) -> Result<Option<usize>, RecordError> {
    if buf.len() < LOG_OVERHEAD {
        return Ok(None);
    }
    let batch_length = i32::from_be_bytes(
        buf[BATCH_LENGTH_OFFSET..BATCH_LENGTH_OFFSET + 4]
            .try_into()
            .expect("4-byte slice"),
    );
    check_batch_length(batch_length)?;
    if let Some(&magic) = buf.get(MAGIC_OFFSET) {
        check_magic(magic as i8)?;
    }
    Ok(Some(batch_length as usize + LOG_OVERHEAD))
}

/// Overwrites BaseOffset and PartitionLeaderEpoch, the two header fields the CRC does not cover:
/// the leader assigns them when it appends a client's batch. The CRC stays valid.
///
/// `batch` must be a whole batch (the caller validated it): a buffer that is not one is a bug.
pub fn stamp(batch: &mut [u8], base_offset: i64, partition_leader_epoch: i32) {
    let batch_len = batch.len();
    let (raw, _) =
        RawBatchHeader::mut_from_prefix(batch).expect("stamp: buffer shorter than a batch header");
    assert_eq!(raw.magic, MAGIC, "stamp: not a RecordBatch v2");
    assert_eq!(
        raw.batch_length.get() as i64 + LOG_OVERHEAD as i64,
        batch_len as i64,
        "stamp: BatchLength disagrees with the buffer"
    );
    raw.base_offset.set(base_offset);
    raw.partition_leader_epoch.set(partition_leader_epoch);
}
