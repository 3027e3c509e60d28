//! Builds one uncompressed RecordBatch v2, records encoded in place into a single buffer.

use bytes::{BufMut, BytesMut};

use super::header::{
    RawBatchHeader, ATTR_CONTROL, ATTR_TIMESTAMP_TYPE, ATTR_TRANSACTIONAL, BATCH_HEADER_LEN,
    CRC_START, LOG_OVERHEAD, MAGIC, MAX_BATCH_SIZE,
};
use super::varint;
use zerocopy::FromBytes;

/// Accumulates records into one batch. Each `append` computes the record's size first, so its
/// Length prefix and fields are written once, straight into the batch buffer: no per-record
/// allocation, no second pass. `build` fills in the header and the CRC.
#[derive(Debug)]
pub struct RecordBatchBuilder {
    buf: BytesMut,
    base_offset: i64,
    partition_leader_epoch: i32,
    attributes: i16,
    /// Set explicitly, or taken from the first record.
    base_timestamp: Option<i64>,
    max_timestamp: i64,
    /// With log-append time, MaxTimestamp is this time whatever the records say.
    log_append_time: Option<i64>,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    count: u32,
}

impl RecordBatchBuilder {
    pub fn new(base_offset: i64, partition_leader_epoch: i32) -> Self {
        Self::with_capacity(base_offset, partition_leader_epoch, 0)
    }

    /// `capacity`: the expected bytes of records, to allocate the buffer once.
    pub fn with_capacity(base_offset: i64, partition_leader_epoch: i32, capacity: usize) -> Self {
        let mut buf = BytesMut::with_capacity(BATCH_HEADER_LEN + capacity);
        buf.put_bytes(0, BATCH_HEADER_LEN);
        Self {
            buf,
            base_offset,
            partition_leader_epoch,
            attributes: 0,
            base_timestamp: None,
            max_timestamp: -1,
            log_append_time: None,
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
            count: 0,
        }
    }

    /// Fixes BaseTimestamp (otherwise the first record's timestamp). Call before `append`.
    pub fn base_timestamp(mut self, timestamp_ms: i64) -> Self {
        assert_eq!(self.count, 0, "base_timestamp after append");
        self.base_timestamp = Some(timestamp_ms);
        self
    }

    /// Marks the batch's timestamps as log-append time (attribute bit 3); MaxTimestamp = `time_ms`.
    pub fn log_append_time(mut self, time_ms: i64) -> Self {
        self.attributes |= ATTR_TIMESTAMP_TYPE;
        self.log_append_time = Some(time_ms);
        self
    }

    /// Marks the batch as a control batch (attribute bit 5).
    pub fn control(mut self, is_control: bool) -> Self {
        self.set_attribute(ATTR_CONTROL, is_control);
        self
    }

    /// Marks the batch as transactional (attribute bit 4).
    pub fn transactional(mut self, is_transactional: bool) -> Self {
        self.set_attribute(ATTR_TRANSACTIONAL, is_transactional);
        self
    }

    /// Idempotent-producer fields (all -1 by default).
    pub fn producer(mut self, producer_id: i64, producer_epoch: i16, base_sequence: i32) -> Self {
        self.producer_id = producer_id;
        self.producer_epoch = producer_epoch;
        self.base_sequence = base_sequence;
        self
    }

    fn set_attribute(&mut self, bit: i16, on: bool) {
        if on {
            self.attributes |= bit;
        } else {
            self.attributes &= !bit;
        }
    }

    /// Appends one record at the next offset delta.
    pub fn append(
        &mut self,
        timestamp_ms: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[(&str, Option<&[u8]>)],
    ) {
        assert!(
            self.count < i32::MAX as u32,
            "too many records for one batch"
        );
        let base_timestamp = *self.base_timestamp.get_or_insert(timestamp_ms);
        let timestamp_delta = timestamp_ms.wrapping_sub(base_timestamp);
        let offset_delta = self.count as i32;

        let body_len = 1
            + varint::varlong_len(timestamp_delta)
            + varint::varint_len(offset_delta)
            + nullable_len(key)
            + nullable_len(value)
            + varint::varint_len(len_i32(headers.len()))
            + headers
                .iter()
                .map(|(k, v)| nullable_len(Some(k.as_bytes())) + nullable_len(*v))
                .sum::<usize>();
        let body_len_i32 = len_i32(body_len);
        let record_len = varint::varint_len(body_len_i32) + body_len;

        // Grow once, then store fields by index: no capacity check or call per varint.
        let start = self.buf.len();
        self.buf.resize(start + record_len, 0);
        let mut out = SliceWriter {
            buf: &mut self.buf[start..],
            position: 0,
        };
        out.varint(body_len_i32);
        let body_start = out.position;
        out.byte(0); // record attributes: unused in v2
        out.varlong(timestamp_delta);
        out.varint(offset_delta);
        out.nullable(key);
        out.nullable(value);
        out.varint(len_i32(headers.len()));
        for (header_key, header_value) in headers {
            out.nullable(Some(header_key.as_bytes()));
            out.nullable(*header_value);
        }
        assert_eq!(out.position - body_start, body_len);
        assert_eq!(out.position, record_len);

        self.max_timestamp = self.max_timestamp.max(timestamp_ms);
        self.count += 1;
    }

    /// Records appended so far.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Bytes the batch will take if built now (exact for an uncompressed batch).
    pub fn estimated_size(&self) -> usize {
        self.buf.len()
    }

    /// Writes the header and CRC and hands the batch over. Panics if no record was appended or
    /// the batch exceeds [`MAX_BATCH_SIZE`] (callers bound their batches well below it).
    pub fn build(mut self) -> BytesMut {
        assert!(self.count > 0, "a batch holds at least one record");
        assert!(
            self.buf.len() <= MAX_BATCH_SIZE,
            "batch larger than MAX_BATCH_SIZE"
        );
        let batch_length = (self.buf.len() - LOG_OVERHEAD) as i32;
        let max_timestamp = self.log_append_time.unwrap_or(self.max_timestamp);
        let base_timestamp = self.base_timestamp.expect("set by the first append");
        {
            let (raw, _) = RawBatchHeader::mut_from_prefix(&mut self.buf[..])
                .expect("buffer starts with a header");
            raw.base_offset.set(self.base_offset);
            raw.batch_length.set(batch_length);
            raw.partition_leader_epoch.set(self.partition_leader_epoch);
            raw.magic = MAGIC;
            raw.attributes.set(self.attributes);
            raw.last_offset_delta.set(self.count as i32 - 1);
            raw.base_timestamp.set(base_timestamp);
            raw.max_timestamp.set(max_timestamp);
            raw.producer_id.set(self.producer_id);
            raw.producer_epoch.set(self.producer_epoch);
            raw.base_sequence.set(self.base_sequence);
            raw.records_count.set(self.count as i32);
        }
        let crc = crc32c::crc32c(&self.buf[CRC_START..]);
        let (raw, _) = RawBatchHeader::mut_from_prefix(&mut self.buf[..]).expect("header");
        raw.crc.set(crc);
        self.buf
    }
}

fn len_i32(len: usize) -> i32 {
    i32::try_from(len).expect("length exceeds i32::MAX")
}

fn nullable_len(field: Option<&[u8]>) -> usize {
    match field {
        None => 1,
        Some(bytes) => varint::varint_len(len_i32(bytes.len())) + bytes.len(),
    }
}

/// Writes a record into space already reserved for it (sizes computed beforehand).
struct SliceWriter<'a> {
    buf: &'a mut [u8],
    position: usize,
}

impl SliceWriter<'_> {
    #[inline(always)]
    fn byte(&mut self, byte: u8) {
        self.buf[self.position] = byte;
        self.position += 1;
    }

    #[inline(always)]
    fn varint(&mut self, value: i32) {
        self.uvarlong(u64::from(varint::zigzag32(value)));
    }

    #[inline(always)]
    fn varlong(&mut self, value: i64) {
        self.uvarlong(varint::zigzag64(value));
    }

    #[inline(always)]
    fn uvarlong(&mut self, mut value: u64) {
        while value >= 0x80 {
            self.byte((value as u8) | 0x80);
            value >>= 7;
        }
        self.byte(value as u8);
    }

    #[inline(always)]
    fn nullable(&mut self, field: Option<&[u8]>) {
        match field {
            None => self.varint(-1),
            Some(bytes) => {
                self.varint(len_i32(bytes.len()));
                self.buf[self.position..self.position + bytes.len()].copy_from_slice(bytes);
                self.position += bytes.len();
            }
        }
    }
}
