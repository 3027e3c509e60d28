//! A validated, zero-copy view of one RecordBatch v2 held in a [`Bytes`].

use std::ops::Range;

use bytes::Bytes;

use super::batch::Batch;
use super::compression::{self, Compression, MAX_DECOMPRESSED_BYTES};
use super::error::RecordError;
use super::header::{BatchHeader, CRC_START, MIN_RECORD_LEN, RECORDS_OFFSET};
use super::varint;

/// One record of a batch. Key, value and headers are slices of the batch's [`Bytes`] (no copy).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub attributes: i8,
    pub timestamp_delta: i64,
    pub offset_delta: i32,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    /// (key, value); keys are valid UTF-8 (checked by [`BatchView::parse`]).
    pub headers: Vec<(Bytes, Option<Bytes>)>,
}

impl Record {
    /// The record's absolute offset in a batch starting at `base_offset`.
    pub fn offset(&self, base_offset: i64) -> i64 {
        base_offset + i64::from(self.offset_delta)
    }

    /// The record's timestamp in a batch whose BaseTimestamp is `base_timestamp`.
    pub fn timestamp(&self, base_timestamp: i64) -> i64 {
        base_timestamp.wrapping_add(self.timestamp_delta)
    }
}

/// Exactly one batch, checked in full by [`BatchView::parse`]: header bounds, magic, CRC-32C,
/// record count, and the framing of every record (after decompression, for a compressed
/// batch). The header is decoded once, at parse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatchView {
    header: BatchHeader,
    bytes: Bytes,
    /// The records: `bytes` itself for an uncompressed batch (from [`RECORDS_OFFSET`] on), the
    /// decompressed records section (from 0) for a compressed one.
    records: Bytes,
    records_start: usize,
}

impl BatchView {
    /// Validates `bytes` as exactly one batch; a compressed batch's records are decompressed
    /// (at most [`MAX_DECOMPRESSED_BYTES`]) and checked like an uncompressed batch's
    /// ([`RecordError::InCompressedRecords`] when they fail).
    /// Fewer bytes than the header declares is [`RecordError::TooShort`] (see
    /// [`RecordError::is_incomplete`]).
    pub fn parse(bytes: Bytes) -> Result<BatchView, RecordError> {
        let header = check_frame(&bytes)?;
        let count = header.records_count as u32;
        let (records, records_start) = match Compression::from_attributes(header.attributes)? {
            Compression::None => {
                validate_records(&bytes, RECORDS_OFFSET, count)?;
                (bytes.clone(), RECORDS_OFFSET)
            }
            codec => {
                let section = &bytes[RECORDS_OFFSET..];
                let plain = compression::decompress(codec, section, MAX_DECOMPRESSED_BYTES)?;
                if count as usize > plain.len() / MIN_RECORD_LEN {
                    return Err(RecordError::RecordCountMismatch {
                        records_count: header.records_count,
                        last_offset_delta: header.last_offset_delta,
                    });
                }
                validate_records(&plain, 0, count).map_err(|source| {
                    RecordError::InCompressedRecords {
                        codec: codec.name(),
                        source: Box::new(source),
                    }
                })?;
                (Bytes::from(plain), 0)
            }
        };
        Ok(BatchView {
            header,
            bytes,
            records,
            records_start,
        })
    }

    /// The batch's compression codec.
    pub fn compression(&self) -> Compression {
        Compression::from_attributes(self.header.attributes).expect("checked by parse")
    }

    pub fn header(&self) -> &BatchHeader {
        &self.header
    }

    pub fn base_offset(&self) -> i64 {
        self.header.base_offset
    }

    pub fn last_offset(&self) -> i64 {
        self.header.last_offset()
    }

    /// One past the last offset.
    pub fn next_offset(&self) -> i64 {
        self.header.next_offset()
    }

    pub fn partition_leader_epoch(&self) -> i32 {
        self.header.partition_leader_epoch
    }

    pub fn record_count(&self) -> u32 {
        self.header.records_count as u32
    }

    pub fn attributes(&self) -> i16 {
        self.header.attributes
    }

    pub fn is_control(&self) -> bool {
        self.header.is_control()
    }

    pub fn is_transactional(&self) -> bool {
        self.header.is_transactional()
    }

    pub fn is_log_append_time(&self) -> bool {
        self.header.is_log_append_time()
    }

    pub fn crc(&self) -> u32 {
        self.header.crc
    }

    pub fn base_timestamp(&self) -> i64 {
        self.header.base_timestamp
    }

    pub fn max_timestamp(&self) -> i64 {
        self.header.max_timestamp
    }

    pub fn producer_id(&self) -> i64 {
        self.header.producer_id
    }

    pub fn producer_epoch(&self) -> i16 {
        self.header.producer_epoch
    }

    pub fn base_sequence(&self) -> i32 {
        self.header.base_sequence
    }

    /// Size of the whole batch in bytes.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Always false: a valid batch holds at least one record. Here for clippy's `len` rule.
    pub fn is_empty(&self) -> bool {
        false
    }

    pub fn bytes(&self) -> &Bytes {
        &self.bytes
    }

    pub fn into_bytes(self) -> Bytes {
        self.bytes
    }

    /// The records, in offset order, as slices of the batch (of its decompressed records, for a
    /// compressed batch).
    pub fn records(&self) -> RecordIter {
        RecordIter {
            bytes: self.records.clone(),
            position: self.records_start,
            next_index: 0,
            count: self.record_count(),
        }
    }

    /// The records as borrowed slices: no reference counting, for readers that do not keep
    /// them (state machines applying records, dumps, checks).
    pub fn record_refs(&self) -> RecordRefIter<'_> {
        RecordRefIter {
            batch: &self.records,
            position: self.records_start,
            next_index: 0,
            count: self.record_count(),
        }
    }

    /// The batch as the Raft core sees it (shares the bytes).
    pub fn to_raft_batch(&self) -> Batch {
        Batch {
            base_offset: self.base_offset(),
            epoch: self.partition_leader_epoch(),
            record_count: self.record_count(),
            is_control: self.is_control(),
            bytes: self.bytes.clone(),
        }
    }
}

impl Batch {
    /// A batch that was validated in full ([`BatchView::parse`]) when it entered the log, read
    /// back from a log or from the leader: only its framing, CRC-32C and record count are
    /// checked. The CRC covers every byte a parse looked at, so a batch that passes is the one
    /// that was validated, and a compressed batch is not decompressed again on every replica and
    /// every read.
    pub fn from_stored(bytes: Bytes) -> Result<Batch, RecordError> {
        let header = check_frame(&bytes)?;
        Ok(Batch {
            base_offset: header.base_offset,
            epoch: header.partition_leader_epoch,
            record_count: header.records_count as u32,
            is_control: header.is_control(),
            bytes,
        })
    }
}

/// Exactly one whole batch (no bytes missing, none after it) whose CRC-32C matches and whose
/// record count agrees with its offsets.
fn check_frame(bytes: &Bytes) -> Result<BatchHeader, RecordError> {
    let header = BatchHeader::read_framing(bytes)?;
    if header.total_len() > bytes.len() {
        return Err(RecordError::TooShort {
            available: bytes.len(),
            needed: header.total_len(),
        });
    }
    if header.total_len() < bytes.len() {
        return Err(RecordError::BadLength {
            batch_length: header.batch_length,
            declared_size: header.total_len() as i64,
            reason: "bytes follow the batch",
        });
    }
    let actual = crc32c::crc32c(&bytes[CRC_START..]);
    if actual != header.crc {
        return Err(RecordError::CrcMismatch {
            expected: header.crc,
            actual,
            end: bytes.len(),
        });
    }
    header.check_records_count()?;
    Ok(header)
}

/// Iterates the records of a validated batch. Yields `Record`s, not results: the framing was
/// already checked by [`BatchView::parse`].
#[derive(Clone, Debug)]
pub struct RecordIter {
    bytes: Bytes,
    position: usize,
    next_index: u32,
    count: u32,
}

impl Iterator for RecordIter {
    type Item = Record;

    fn next(&mut self) -> Option<Record> {
        if self.next_index == self.count {
            assert_eq!(self.position, self.bytes.len());
            return None;
        }
        let spans = read_record(&self.bytes, self.position, self.next_index)
            .expect("record framing was validated by BatchView::parse");
        self.position = spans.end;
        self.next_index += 1;
        Some(spans.to_record(&self.bytes))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = (self.count - self.next_index) as usize;
        (left, Some(left))
    }
}

impl ExactSizeIterator for RecordIter {}

/// One record of a batch, borrowed from it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordRef<'a> {
    pub attributes: i8,
    pub timestamp_delta: i64,
    pub offset_delta: i32,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    headers_count: u32,
    headers: &'a [u8],
}

impl<'a> RecordRef<'a> {
    pub fn offset(&self, base_offset: i64) -> i64 {
        base_offset + i64::from(self.offset_delta)
    }

    pub fn timestamp(&self, base_timestamp: i64) -> i64 {
        base_timestamp.wrapping_add(self.timestamp_delta)
    }

    pub fn headers_count(&self) -> usize {
        self.headers_count as usize
    }

    /// The headers, (key, value), in order.
    pub fn headers(&self) -> impl ExactSizeIterator<Item = (&'a str, Option<&'a [u8]>)> + 'a {
        let headers = self.headers;
        let mut cursor = Cursor {
            buf: headers,
            position: 0,
            end: headers.len(),
            record: 0,
        };
        (0..self.headers_count).map(move |_| {
            let (key, value) = read_header(&mut cursor).expect("headers were validated");
            let key = std::str::from_utf8(&headers[key]).expect("header keys were validated");
            (key, value.map(|range| &headers[range]))
        })
    }
}

/// Iterates the records of a validated batch as borrowed [`RecordRef`]s.
#[derive(Clone, Debug)]
pub struct RecordRefIter<'a> {
    batch: &'a [u8],
    position: usize,
    next_index: u32,
    count: u32,
}

impl<'a> Iterator for RecordRefIter<'a> {
    type Item = RecordRef<'a>;

    fn next(&mut self) -> Option<RecordRef<'a>> {
        if self.next_index == self.count {
            assert_eq!(self.position, self.batch.len());
            return None;
        }
        let spans = read_record(self.batch, self.position, self.next_index)
            .expect("record framing was validated by BatchView::parse");
        self.position = spans.end;
        self.next_index += 1;
        let batch = self.batch;
        Some(RecordRef {
            attributes: spans.attributes,
            timestamp_delta: spans.timestamp_delta,
            offset_delta: spans.offset_delta,
            key: spans.key.map(|range| &batch[range]),
            value: spans.value.map(|range| &batch[range]),
            headers_count: spans.headers_count,
            headers: &batch[spans.headers_start..spans.end],
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = (self.count - self.next_index) as usize;
        (left, Some(left))
    }
}

impl ExactSizeIterator for RecordRefIter<'_> {}

/// Where the fields of one record lie in the batch.
struct RecordSpans {
    attributes: i8,
    timestamp_delta: i64,
    offset_delta: i32,
    key: Option<Range<usize>>,
    value: Option<Range<usize>>,
    headers_count: u32,
    headers_start: usize,
    /// One past the record's last byte.
    end: usize,
}

impl RecordSpans {
    fn to_record(&self, bytes: &Bytes) -> Record {
        let slice = |range: &Option<Range<usize>>| range.clone().map(|r| bytes.slice(r));
        let mut headers = Vec::with_capacity(self.headers_count as usize);
        let mut cursor = Cursor {
            buf: bytes,
            position: self.headers_start,
            end: self.end,
            record: 0,
        };
        for _ in 0..self.headers_count {
            let (key, value) = read_header(&mut cursor).expect("headers were validated");
            headers.push((bytes.slice(key), slice(&value)));
        }
        Record {
            attributes: self.attributes,
            timestamp_delta: self.timestamp_delta,
            offset_delta: self.offset_delta,
            key: slice(&self.key),
            value: slice(&self.value),
            headers,
        }
    }
}

/// Checks the `count` records that start at `start` in `batch` and end exactly at its end.
fn validate_records(batch: &[u8], start: usize, count: u32) -> Result<(), RecordError> {
    let mut position = start;
    for index in 0..count {
        position = read_record(batch, position, index)?.end;
    }
    if position != batch.len() {
        return Err(RecordError::TrailingBytes {
            offset: position,
            extra: batch.len() - position,
        });
    }
    Ok(())
}

/// Reads the record at `start` that must carry offset delta `index`, checking every length.
#[inline]
fn read_record(batch: &[u8], start: usize, index: u32) -> Result<RecordSpans, RecordError> {
    assert!(start <= batch.len());
    let mut cursor = Cursor {
        buf: batch,
        position: start,
        end: batch.len(),
        record: index,
    };
    let length = cursor.varint()?;
    let available = batch.len() - cursor.position;
    if length < 0 || length as usize > available {
        return Err(RecordError::BadRecordLength {
            record: index,
            offset: start,
            length,
            available,
        });
    }
    let body_start = cursor.position;
    cursor.end = body_start + length as usize;

    let attributes = cursor.byte()? as i8;
    let timestamp_delta = cursor.varlong()?;
    let delta_at = cursor.position;
    let offset_delta = cursor.varint()?;
    if i64::from(offset_delta) != i64::from(index) {
        return Err(RecordError::BadOffsetDelta {
            record: index,
            offset: delta_at,
            expected: index as i32,
            actual: offset_delta,
        });
    }
    let key = cursor.nullable_bytes("key")?;
    let value = cursor.nullable_bytes("value")?;
    let headers_count = cursor.length("header count", 0)?;
    let headers_start = cursor.position;
    for _ in 0..headers_count {
        read_header(&mut cursor)?;
    }
    if cursor.position != cursor.end {
        return Err(RecordError::RecordLengthMismatch {
            record: index,
            offset: start,
            declared: length as usize,
            used: cursor.position - body_start,
        });
    }
    Ok(RecordSpans {
        attributes,
        timestamp_delta,
        offset_delta,
        key,
        value,
        headers_count: headers_count as u32,
        headers_start,
        end: cursor.end,
    })
}

fn read_header(cursor: &mut Cursor) -> Result<(Range<usize>, Option<Range<usize>>), RecordError> {
    let key_at = cursor.position;
    let key_len = cursor.length("header key", 0)?;
    let key = cursor.take(key_len as usize)?;
    if std::str::from_utf8(&cursor.buf[key.clone()]).is_err() {
        return Err(RecordError::BadHeaderKey {
            record: cursor.record,
            offset: key_at,
        });
    }
    let value = cursor.nullable_bytes("header value")?;
    Ok((key, value))
}

/// Reads fields of one record, never past `end` (the record's end once its Length is known).
struct Cursor<'a> {
    buf: &'a [u8],
    position: usize,
    end: usize,
    record: u32,
}

impl Cursor<'_> {
    #[inline(always)]
    fn remaining(&self) -> &[u8] {
        &self.buf[self.position..self.end]
    }

    #[inline(always)]
    fn byte(&mut self) -> Result<u8, RecordError> {
        let range = self.take(1)?;
        Ok(self.buf[range.start])
    }

    #[inline(always)]
    fn varint(&mut self) -> Result<i32, RecordError> {
        self.variable_length(varint::get_varint)
    }

    #[inline(always)]
    fn varlong(&mut self) -> Result<i64, RecordError> {
        self.variable_length(varint::get_varlong)
    }

    /// One zigzag varint or varlong, decoded by `get`; an error names where it starts.
    #[inline(always)]
    fn variable_length<T>(
        &mut self,
        get: impl FnOnce(&[u8]) -> Result<(T, usize), varint::VarintError>,
    ) -> Result<T, RecordError> {
        let (value, used) =
            get(self.remaining()).map_err(|e| RecordError::varint_at(e, self.position))?;
        self.position += used;
        Ok(value)
    }

    /// A varint length that must be at least `min`.
    #[inline(always)]
    fn length(&mut self, field: &'static str, min: i32) -> Result<i32, RecordError> {
        let offset = self.position;
        let length = self.varint()?;
        if length < min {
            return Err(RecordError::BadFieldLength {
                record: self.record,
                offset,
                field,
                length,
            });
        }
        Ok(length)
    }

    /// A varint length (-1 = null) followed by that many bytes.
    #[inline(always)]
    fn nullable_bytes(&mut self, field: &'static str) -> Result<Option<Range<usize>>, RecordError> {
        let length = self.length(field, -1)?;
        if length == -1 {
            return Ok(None);
        }
        self.take(length as usize).map(Some)
    }

    #[inline(always)]
    fn take(&mut self, len: usize) -> Result<Range<usize>, RecordError> {
        let available = self.end - self.position;
        if len > available {
            return Err(RecordError::RecordOverrun {
                record: self.record,
                offset: self.position,
                needed: len,
                available,
            });
        }
        let range = self.position..self.position + len;
        self.position += len;
        Ok(range)
    }
}
