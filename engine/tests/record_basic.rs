//! Hand-written cases for engine::record: round trips, header fields, stamping, control records,
//! and specific malformed batches with the error each must produce.

use bytes::{Bytes, BytesMut};
use engine::base::DirectoryId;
use engine::record::control::{ControlRecord, ControlRecordType, LeaderChange, QuorumReassignment};
use engine::record::{
    peek_batch_len, stamp, Batch, BatchHeader, BatchIter, BatchView, RecordBatchBuilder,
    RecordError, BATCH_HEADER_LEN, CRC_OFFSET, CRC_START, MAGIC_OFFSET, RECORDS_OFFSET,
};

fn three_record_batch() -> BytesMut {
    let mut builder = RecordBatchBuilder::new(100, 7).producer(42, 3, 9);
    builder.append(1_000, Some(b"k1"), Some(b"v1"), &[]);
    builder.append(999, None, Some(b""), &[("h", Some(b"x")), ("empty", None)]);
    builder.append(1_005, Some(b""), None, &[]);
    assert_eq!(builder.len(), 3);
    let size = builder.estimated_size();
    let batch = builder.build();
    assert_eq!(batch.len(), size);
    batch
}

#[test]
fn built_batch_parses_back() {
    let view = BatchView::parse(three_record_batch().freeze()).unwrap();
    assert_eq!(view.base_offset(), 100);
    assert_eq!(view.last_offset(), 102);
    assert_eq!(view.next_offset(), 103);
    assert_eq!(view.partition_leader_epoch(), 7);
    assert_eq!(view.record_count(), 3);
    assert!(!view.is_control());
    assert_eq!(view.base_timestamp(), 1_000);
    assert_eq!(view.max_timestamp(), 1_005);
    assert_eq!(view.producer_id(), 42);
    assert_eq!(view.producer_epoch(), 3);
    assert_eq!(view.base_sequence(), 9);

    let records: Vec<_> = view.records().collect();
    assert_eq!(records.len(), 3);
    assert_eq!(records[0].key.as_deref(), Some(&b"k1"[..]));
    assert_eq!(records[0].value.as_deref(), Some(&b"v1"[..]));
    assert_eq!(records[0].offset(view.base_offset()), 100);
    assert_eq!(records[1].key, None);
    assert_eq!(records[1].value.as_deref(), Some(&b""[..]));
    assert_eq!(records[1].timestamp(view.base_timestamp()), 999);
    assert_eq!(
        records[1].headers,
        vec![
            (Bytes::from_static(b"h"), Some(Bytes::from_static(b"x"))),
            (Bytes::from_static(b"empty"), None)
        ]
    );
    assert_eq!(records[2].value, None);
    assert_eq!(records[2].offset_delta, 2);
}

#[test]
fn record_slices_share_the_batch_buffer() {
    let view = BatchView::parse(three_record_batch().freeze()).unwrap();
    let range = view.bytes().as_ptr_range();
    let record = view.records().next().unwrap();
    let key = record.key.unwrap();
    assert!(range.contains(&key.as_ptr()));
}

#[test]
fn raft_batch_carries_header_fields() {
    let view = BatchView::parse(three_record_batch().freeze()).unwrap();
    let batch = view.to_raft_batch();
    assert_eq!(batch.base_offset, 100);
    assert_eq!(batch.epoch, 7);
    assert_eq!(batch.record_count, 3);
    assert!(!batch.is_control);
    assert_eq!(batch.end_offset(), 103);
    assert_eq!(&batch.bytes, view.bytes());
}

#[test]
fn stamp_keeps_the_crc_valid() {
    let mut batch = three_record_batch();
    let crc_before = BatchView::parse(batch.clone().freeze()).unwrap().crc();
    stamp(&mut batch, 5_000, 12);
    let view = BatchView::parse(batch.freeze()).unwrap();
    assert_eq!(view.base_offset(), 5_000);
    assert_eq!(view.partition_leader_epoch(), 12);
    assert_eq!(view.crc(), crc_before);
}

#[test]
#[should_panic(expected = "BatchLength disagrees")]
fn stamp_refuses_a_partial_batch() {
    let mut batch = three_record_batch();
    let len = batch.len();
    stamp(&mut batch[..len - 1], 0, 0);
}

#[test]
fn peek_and_header_read_see_the_length() {
    let batch = three_record_batch();
    assert_eq!(peek_batch_len(&batch[..11]), Ok(None));
    assert_eq!(peek_batch_len(&batch[..12]), Ok(Some(batch.len())));
    assert_eq!(peek_batch_len(&batch), Ok(Some(batch.len())));
    let header = BatchHeader::read(&batch).unwrap();
    assert_eq!(header.total_len(), batch.len());
    assert_eq!(header.records_count, 3);
    assert!(matches!(
        BatchHeader::read(&batch[..BATCH_HEADER_LEN - 1]),
        Err(RecordError::TooShort { .. })
    ));
    // Header-only reads do not need the records.
    assert!(BatchHeader::read(&batch[..BATCH_HEADER_LEN]).is_ok());
}

/// Damaged bytes are not a torn write: only `TooShort` is incomplete (caught by this test:
/// `RecordError::is_incomplete` always true).
#[test]
fn corrupt_crc_region_is_a_crc_mismatch() {
    let mut batch = three_record_batch();
    let last = batch.len() - 1;
    batch[last] ^= 0x01;
    let error = BatchView::parse(batch.freeze()).unwrap_err();
    assert!(
        matches!(error, RecordError::CrcMismatch { .. }),
        "{error:?}"
    );
    assert!(!error.is_incomplete(), "{error:?}");
}

/// A varint cut by its record's end is named at the byte where it stops, counted from the batch
/// start (caught by this test: `offset + read` turned into `offset - read` in
/// `RecordError::varint_at`).
#[test]
fn a_varint_cut_by_the_record_end_is_named_where_it_stops() {
    let mut builder = RecordBatchBuilder::new(0, 0);
    builder.append(0, None, Some(b"a"), &[]);
    let mut batch = builder.build();
    // Record 0: Length Attributes TimestampDelta OffsetDelta KeyLength(-1) ValueLength(1) 'a'
    // HeadersCount(0): the last byte of the batch.
    let headers_at = batch.len() - 1;
    assert_eq!(headers_at, RECORDS_OFFSET + 7);
    assert_eq!(batch[headers_at], 0);
    batch[headers_at] = 0x80; // a continuation bit with nothing after it
    recrc(&mut batch);
    let error = BatchView::parse(batch.clone().freeze()).unwrap_err();
    assert_eq!(
        error,
        RecordError::TruncatedVarint {
            offset: batch.len()
        }
    );
    assert!(
        !error.is_incomplete(),
        "the batch is whole; its record is not"
    );
}

#[test]
fn bad_magic_is_named() {
    let mut batch = three_record_batch();
    batch[MAGIC_OFFSET] = 1;
    assert_eq!(
        BatchView::parse(batch.clone().freeze()),
        Err(RecordError::BadMagic { magic: 1 })
    );
    assert_eq!(
        peek_batch_len(&batch),
        Err(RecordError::BadMagic { magic: 1 })
    );
}

#[test]
fn trailing_and_missing_bytes_are_length_errors() {
    let batch = three_record_batch();
    let mut longer = batch.to_vec();
    longer.push(0);
    assert!(matches!(
        BatchView::parse(Bytes::from(longer)),
        Err(RecordError::BadLength { .. })
    ));
    let shorter = Bytes::copy_from_slice(&batch[..batch.len() - 1]);
    let error = BatchView::parse(shorter).unwrap_err();
    assert_eq!(
        error,
        RecordError::TooShort {
            available: batch.len() - 1,
            needed: batch.len()
        }
    );
    assert!(error.is_incomplete());
}

/// A stored batch is checked for framing and CRC only: a "gzip" batch whose records section is
/// not gzip (with a CRC made to match) fails a full parse but passes as stored, which is why
/// only batches validated in full on their way into the log are read that way.
#[test]
fn a_stored_batch_is_not_decompressed_but_its_crc_is_checked() {
    let mut batch = three_record_batch();
    let attributes_at = CRC_START;
    batch[attributes_at + 1] |= 1; // compression: gzip
    recrc(&mut batch);
    let batch = batch.freeze();
    assert!(matches!(
        BatchView::parse(batch.clone()),
        Err(RecordError::Decompression { .. })
    ));
    let stored = Batch::from_stored(batch.clone()).unwrap();
    assert_eq!(
        (
            stored.base_offset,
            stored.epoch,
            stored.record_count,
            stored.is_control
        ),
        (100, 7, 3, false)
    );
    let mut damaged = batch.to_vec();
    damaged[RECORDS_OFFSET] ^= 1;
    assert!(matches!(
        Batch::from_stored(Bytes::from(damaged)),
        Err(RecordError::CrcMismatch { .. })
    ));
}

/// Rewrites the CRC so that a deliberate change of the records reaches the framing checks.
fn recrc(batch: &mut [u8]) {
    let crc = crc32c::crc32c(&batch[CRC_START..]);
    batch[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
}

#[test]
fn wrong_offset_delta_is_named() {
    let mut builder = RecordBatchBuilder::new(0, 0);
    builder.append(0, None, Some(b"a"), &[]);
    builder.append(0, None, Some(b"b"), &[]);
    let mut batch = builder.build();
    // Record 0: Length(1) Attributes(1) TimestampDelta(1) then OffsetDelta.
    let delta_at = RECORDS_OFFSET + 3;
    assert_eq!(batch[delta_at], 0);
    batch[delta_at] = 2; // zigzag 1
    recrc(&mut batch);
    assert_eq!(
        BatchView::parse(batch.freeze()),
        Err(RecordError::BadOffsetDelta {
            record: 0,
            offset: delta_at,
            expected: 0,
            actual: 1
        })
    );
}

#[test]
fn record_count_must_match_last_offset_delta() {
    let mut batch = three_record_batch();
    batch[60] = 2; // RecordsCount 2, LastOffsetDelta still 2
    recrc(&mut batch);
    assert_eq!(
        BatchView::parse(batch.freeze()),
        Err(RecordError::RecordCountMismatch {
            records_count: 2,
            last_offset_delta: 2
        })
    );
}

#[test]
fn a_batch_marked_compressed_whose_records_do_not_decompress_is_refused() {
    for (codec, name) in [(1, "gzip"), (2, "snappy"), (3, "lz4"), (4, "zstd")] {
        let mut batch = three_record_batch();
        batch[22] |= codec; // plain records under a codec's flag, CRC made right again
        recrc(&mut batch);
        match BatchView::parse(batch.freeze()) {
            Err(RecordError::Decompression { codec, .. }) => assert_eq!(codec, name),
            other => panic!("{name}: {other:?}"),
        }
    }
}

/// `batch` with its records section replaced by `records` as they are, BatchLength and CRC
/// made right.
fn with_records(batch: &[u8], records: &[u8]) -> Bytes {
    let mut out = BytesMut::from(&batch[..RECORDS_OFFSET]);
    out.extend_from_slice(records);
    let batch_length = (out.len() - 12) as i32;
    out[8..12].copy_from_slice(&batch_length.to_be_bytes());
    recrc(&mut out);
    out.freeze()
}

/// `batch` with its records section replaced by `records` under zstd (attributes bit 4), its
/// BatchLength and CRC made right.
fn zstd_batch(batch: &[u8], records: &[u8]) -> Bytes {
    let mut header = batch[..RECORDS_OFFSET].to_vec();
    header[22] |= 4;
    with_records(&header, &zstd::stream::encode_all(records, 1).unwrap())
}

#[test]
fn a_compressed_batch_is_read_like_the_plain_one_and_kept_as_it_came() {
    let plain = three_record_batch();
    let compressed = zstd_batch(&plain, &plain[RECORDS_OFFSET..]);
    let view = BatchView::parse(compressed.clone()).unwrap();
    let plain_view = BatchView::parse(plain.freeze()).unwrap();
    assert_eq!(view.bytes(), &compressed);
    assert_eq!(
        view.records().collect::<Vec<_>>(),
        plain_view.records().collect::<Vec<_>>()
    );
    assert_eq!(view.record_refs().count(), 3);
}

/// A compressed batch may hold more records than its compressed bytes could at 7 bytes each
/// (librdkafka's zstd and gzip batches of short values do): accepted, header checks included.
#[test]
fn a_compressed_batch_smaller_than_seven_bytes_a_record_is_accepted() {
    let mut builder = RecordBatchBuilder::new(0, 1);
    for _ in 0..1000 {
        builder.append(0, None, Some(b"same"), &[]);
    }
    let plain = builder.build();
    let compressed = zstd_batch(&plain, &plain[RECORDS_OFFSET..]);
    assert!(
        compressed.len() - RECORDS_OFFSET < 1000 * 7,
        "{}",
        compressed.len()
    );
    assert!(BatchHeader::read(&compressed).is_ok());
    let view = BatchView::parse(compressed).unwrap();
    assert_eq!(view.record_refs().count(), 1000);
}

#[test]
fn a_compressed_batch_whose_records_do_not_match_its_header_is_refused() {
    let plain = three_record_batch();
    // Two of the three records: the count in the header no longer holds.
    let first_two = {
        let view = BatchView::parse(plain.clone().freeze()).unwrap();
        let mut builder = RecordBatchBuilder::new(100, 7);
        for record in view.record_refs().take(2) {
            builder.append(record.timestamp_delta, record.key, record.value, &[]);
        }
        builder.build()
    };
    let compressed = zstd_batch(&plain, &first_two[RECORDS_OFFSET..]);
    assert!(BatchView::parse(compressed).is_err());
    // Bytes after the last record.
    let mut extra = plain[RECORDS_OFFSET..].to_vec();
    extra.push(0);
    match BatchView::parse(zstd_batch(&plain, &extra)) {
        Err(RecordError::InCompressedRecords {
            codec: "zstd",
            source,
        }) => {
            assert!(
                matches!(*source, RecordError::TrailingBytes { .. }),
                "{source}"
            )
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_batch_that_decompresses_past_the_largest_batch_is_refused_without_holding_it() {
    let plain = three_record_batch();
    let bomb = vec![0u8; engine::record::compression::MAX_DECOMPRESSED_BYTES + 1];
    let compressed = zstd_batch(&plain, &bomb);
    assert!(compressed.len() < 64 * 1024, "{}", compressed.len());
    assert!(matches!(
        BatchView::parse(compressed),
        Err(RecordError::DecompressedTooLarge { codec: "zstd", .. })
    ));
}

#[test]
fn unknown_compression_codecs_are_refused() {
    for codec in 5..=7 {
        let mut batch = three_record_batch();
        batch[22] |= codec;
        recrc(&mut batch);
        assert!(matches!(
            BatchView::parse(batch.freeze()),
            Err(RecordError::UnsupportedCompression { codec: c, .. }) if c == codec
        ));
    }
}

#[test]
fn leader_change_round_trips_through_a_control_batch() {
    let message = LeaderChange {
        version: 0,
        leader_id: 2,
        voters: vec![1, 2, 3],
        granting_voters: vec![2, 3],
    };
    let view = BatchView::parse(message.to_batch(10, 4, 77).freeze()).unwrap();
    assert!(view.is_control());
    assert_eq!(view.base_offset(), 10);
    assert_eq!(view.partition_leader_epoch(), 4);
    let record = view.records().next().unwrap();
    assert_eq!(record.key.as_deref(), Some(&[0u8, 0, 0, 2][..]));
    assert_eq!(LeaderChange::from_batch(&view), Ok(message.clone()));
    assert_eq!(
        ControlRecord::decode_batch(&view),
        Ok(vec![ControlRecord::LeaderChange(message)])
    );
    assert!(matches!(
        QuorumReassignment::from_batch(&view),
        Err(RecordError::UnexpectedControlType {
            expected: 100,
            actual: 2,
            ..
        })
    ));
}

#[test]
fn leader_change_value_matches_kafka_layout() {
    let message = LeaderChange {
        version: 0,
        leader_id: 1,
        voters: vec![1],
        granting_voters: vec![],
    };
    assert_eq!(
        &message.encode()[..],
        &[0, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 1, 0x00, 0x01, 0x00][..]
    );
}

#[test]
fn quorum_reassignment_round_trips() {
    for target in [None, Some(vec![1, 2, 4]), Some(vec![])] {
        // Voter 2 bound in both lists, 4 in the target only: the tagged VoterDirectoryIds.
        let bound = |ids: &[i32]| -> std::collections::BTreeMap<i32, DirectoryId> {
            ids.iter()
                .map(|&id| (id, DirectoryId([id as u8; 16])))
                .collect()
        };
        let message = QuorumReassignment {
            cluster_id: "cluster-α".to_string(),
            current_voters: vec![1, 2, 3],
            force: target.is_some(),
            current_directories: bound(&[2]),
            target_directories: if target.as_ref().is_some_and(|t| t.contains(&4)) {
                bound(&[2, 4])
            } else {
                Default::default()
            },
            target_voters: target,
        };
        let view = BatchView::parse(message.to_batch(0, 1, 5).freeze()).unwrap();
        assert_eq!(QuorumReassignment::from_batch(&view), Ok(message.clone()));
        let record = view.records().next().unwrap();
        assert_eq!(
            ControlRecordType::from_key(record.key.as_deref(), 0),
            Ok(ControlRecordType::QUORUM_REASSIGNMENT)
        );
    }
}

#[test]
fn data_batch_is_not_a_control_batch() {
    let view = BatchView::parse(three_record_batch().freeze()).unwrap();
    assert!(matches!(
        LeaderChange::from_batch(&view),
        Err(RecordError::NotControlBatch { base_offset: 100 })
    ));
}

#[test]
fn truncated_control_value_is_an_error() {
    let message = LeaderChange {
        version: 0,
        leader_id: 1,
        voters: vec![1, 2],
        granting_voters: vec![1],
    };
    let value = message.encode();
    for len in 0..value.len() {
        assert!(LeaderChange::decode(&value[..len]).is_err(), "len {len}");
    }
    assert_eq!(LeaderChange::decode(&value), Ok(message));
}

#[test]
fn log_append_time_and_transactional_attributes() {
    let mut builder = RecordBatchBuilder::new(0, 1)
        .log_append_time(9_999)
        .transactional(true)
        .base_timestamp(500);
    builder.append(1_000, None, Some(b"v"), &[]);
    builder.append(2_000, None, Some(b"w"), &[]);
    let view = BatchView::parse(builder.build().freeze()).unwrap();
    assert!(view.is_log_append_time());
    assert!(view.is_transactional());
    assert!(!view.is_control());
    assert_eq!(view.attributes(), (1 << 3) | (1 << 4));
    assert_eq!(view.base_timestamp(), 500);
    assert_eq!(view.max_timestamp(), 9_999);
    let timestamps: Vec<_> = view
        .records()
        .map(|r| r.timestamp(view.base_timestamp()))
        .collect();
    assert_eq!(timestamps, [1_000, 2_000]);
}

/// The bounds themselves are allowed: a header and one record, and exactly MAX_BATCH_SIZE
/// (caught: `> MAX_BATCH_SIZE` turned into `>=` in `check_batch_length`).
#[test]
fn a_batch_length_at_either_bound_is_allowed() {
    let mut batch = three_record_batch();
    for length in [56i32, (128 << 20) - 12] {
        batch[8..12].copy_from_slice(&length.to_be_bytes());
        assert_eq!(
            peek_batch_len(&batch),
            Ok(Some(length as usize + 12)),
            "{length}"
        );
    }
}

#[test]
fn batch_length_bounds_are_checked_before_reading_on() {
    let mut batch = three_record_batch();
    for bad_length in [-1i32, 0, 48, 55, (128 << 20) - 11, i32::MAX] {
        batch[8..12].copy_from_slice(&bad_length.to_be_bytes());
        assert!(
            matches!(
                peek_batch_len(&batch),
                Err(RecordError::BadLength { batch_length, .. }) if batch_length == bad_length
            ),
            "{bad_length}"
        );
        assert!(matches!(
            BatchHeader::read(&batch),
            Err(RecordError::BadLength { .. })
        ));
    }
}

#[test]
fn a_record_count_the_bytes_cannot_hold_is_refused_by_the_header_check() {
    let mut batch = three_record_batch();
    let huge: i32 = 1 << 30;
    batch[23..27].copy_from_slice(&(huge - 1).to_be_bytes());
    batch[57..61].copy_from_slice(&huge.to_be_bytes());
    assert_eq!(
        BatchHeader::read(&batch),
        Err(RecordError::RecordCountMismatch {
            records_count: huge,
            last_offset_delta: huge - 1
        })
    );
}

/// The header's bound is exact: as many records as the bytes after the header hold at 7 bytes
/// each pass the header check, one more does not (caught: `total_len() - BATCH_HEADER_LEN`
/// turned into `+`, and `/ MIN_RECORD_LEN` into `*`, in `check_records_count`).
#[test]
fn the_header_bounds_the_record_count_by_the_bytes_after_it_exactly() {
    let batch = three_record_batch();
    let fits = ((batch.len() - 61) / 7) as i32;
    for (count, holds) in [(fits, true), (fits + 1, false)] {
        let mut b = batch.clone();
        b[23..27].copy_from_slice(&(count - 1).to_be_bytes());
        b[57..61].copy_from_slice(&count.to_be_bytes());
        assert_eq!(BatchHeader::read(&b).is_ok(), holds, "{count} records");
    }
}

/// The attribute bits read as Kafka defines them: the codec in bits 0-2, log-append time in
/// bit 3 (caught: `is_log_append_time` always true or with `&` turned into `|` or `^`, and
/// `compression` constant or with `&` turned into `|`).
#[test]
fn the_attribute_bits_read_as_kafka_defines_them() {
    let batch = three_record_batch();
    for (attributes, log_append_time, codec) in [
        (0x00u8, false, 0u8),
        (0x08, true, 0),
        (0x04, false, 4),
        (0x0B, true, 3),
        (0x12, false, 2),
        (0x19, true, 1),
    ] {
        let mut b = batch.clone();
        b[22] = attributes;
        let header = BatchHeader::read(&b).unwrap();
        assert_eq!(
            (header.is_log_append_time(), header.compression()),
            (log_append_time, codec),
            "attributes {attributes:#04x}"
        );
    }
}

/// A builder counts what it was given (caught: `is_empty` constant, or with `==` turned into
/// `!=`).
#[test]
fn a_builder_is_empty_until_a_record_is_appended() {
    let mut builder = RecordBatchBuilder::new(0, 0);
    assert!(builder.is_empty());
    assert_eq!(builder.len(), 0);
    builder.append(0, None, Some(b"v"), &[]);
    assert!(!builder.is_empty() && builder.len() == 1);
}

#[test]
fn non_utf8_header_key_is_named() {
    let mut builder = RecordBatchBuilder::new(0, 0);
    builder.append(0, None, None, &[("ab", None)]);
    let mut batch = builder.build();
    // Record: Length Attributes TimestampDelta OffsetDelta KeyLength ValueLength HeadersCount
    // HeaderKeyLength then the key.
    let key_at = RECORDS_OFFSET + 8;
    assert_eq!(&batch[key_at..key_at + 2], b"ab");
    batch[key_at] = 0xff;
    recrc(&mut batch);
    assert_eq!(
        BatchView::parse(batch.freeze()),
        Err(RecordError::BadHeaderKey {
            record: 0,
            offset: key_at - 1
        })
    );
}

/// Two batches back to back are two items and the end, each iteration moving past its batch
/// (caught by this test as a failure rather than a hang: `position += len` turned into
/// `*= len` in `BatchIter::next_with`, which yields the first batch forever).
#[test]
fn a_buffer_of_two_batches_yields_two_and_ends() {
    let first = three_record_batch();
    let mut all = first.to_vec();
    all.extend_from_slice(&three_record_batch());
    let mut iter = BatchIter::new(Bytes::from(all.clone()));
    let items: Vec<_> = iter.by_ref().take(3).collect();
    assert_eq!(items.len(), 2, "{items:?}");
    assert!(items.iter().all(Result::is_ok));
    assert_eq!((iter.position(), iter.failed()), (all.len(), false));
    let mut stored = BatchIter::new(Bytes::from(all.clone())).stored();
    assert_eq!(stored.by_ref().take(3).count(), 2);
    assert_eq!(stored.position(), all.len());
    assert_eq!(first.len() * 2, all.len());
}

/// A snappy-java stream that decompresses past the limit names the limit it was given, not
/// what was left of it after the earlier blocks (caught by this test: `room + out.len()` turned
/// into `room * out.len()` in `snappy_block`, engine/src/record/compression.rs).
#[test]
fn a_framed_snappy_stream_past_the_limit_names_the_limit() {
    use engine::record::compression::{decompress, Compression};
    // snappy-java's framing: magic, two version words, then (big-endian length, raw block).
    let data = vec![7u8; 4096];
    let mut framed = b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01".to_vec();
    for chunk in data.chunks(1024) {
        let block = snap::raw::Encoder::new().compress_vec(chunk).unwrap();
        framed.extend_from_slice(&u32::try_from(block.len()).unwrap().to_be_bytes());
        framed.extend_from_slice(&block);
    }
    assert_eq!(
        decompress(Compression::Snappy, &framed, 4096).unwrap(),
        data
    );
    // The fourth block finds 1,023 bytes of room after 3,072: the error names the 4,095.
    assert_eq!(
        decompress(Compression::Snappy, &framed, 4095),
        Err(RecordError::DecompressedTooLarge {
            codec: "snappy",
            limit: 4095
        })
    );
}

// ----- control records: what mutation testing found unpinned (docs/testing.md) -----

/// The reason a control value was refused for.
fn refusal(result: Result<impl std::fmt::Debug, RecordError>) -> &'static str {
    match result {
        Err(RecordError::BadControlValue { reason, .. }) => reason,
        other => panic!("not a bad control value: {other:?}"),
    }
}

/// Why decoding `value` as a QuorumReassignment is refused.
fn reassignment_refusal(value: &[u8]) -> &'static str {
    refusal(QuorumReassignment::decode(value))
}

fn reassignment(force: bool) -> QuorumReassignment {
    QuorumReassignment {
        cluster_id: "c".into(),
        current_voters: vec![1, 2],
        target_voters: None,
        force,
        ..Default::default()
    }
}

/// Caught: `version < 0` turned into `>` in `ControlRecordType::from_key`. Later key versions
/// are read (they may only append fields); a negative one is refused.
#[test]
fn a_control_key_of_a_later_version_is_read_and_a_negative_one_refused() {
    assert_eq!(
        ControlRecordType::from_key(Some(&[0, 1, 0, 2, 9]), 0),
        Ok(ControlRecordType::LEADER_CHANGE)
    );
    assert!(matches!(
        ControlRecordType::from_key(Some(&[0xff, 0xff, 0, 2]), 3),
        Err(RecordError::BadControlKey {
            record: 3,
            reason: "negative key version"
        })
    ));
}

/// Caught: the `[0] => false` arm of Force deleted: an explicit false decodes.
#[test]
fn an_explicit_force_false_decodes() {
    let mut value = reassignment(true).encode();
    assert_eq!(
        value[value.len() - 1],
        1,
        "the Force tag's value ends the record"
    );
    let last = value.len() - 1;
    value[last] = 0;
    assert_eq!(QuorumReassignment::decode(&value), Ok(reassignment(false)));
    value[last] = 2;
    assert_eq!(reassignment_refusal(&value), "Force is not a bool");
}

/// Caught: `finish` made to accept anything: a byte after the message is refused.
#[test]
fn a_byte_after_a_control_message_is_refused() {
    let mut value = reassignment(false).encode();
    value.extend_from_slice(&[0]);
    assert_eq!(reassignment_refusal(&value), "bytes after the message");
}

/// Caught: `(len - position) / min` turned into `+` or `*` in the voter-count bounds of
/// `voters` and `bound_voters`. A count the rest of the value cannot hold at 5 bytes a voter
/// is refused as such before anything is allocated or read.
#[test]
fn a_voter_count_the_value_cannot_hold_is_refused_as_such() {
    // CurrentVoters' compact length is at byte 2 (after the cluster id "c").
    let mut value = reassignment(false).encode();
    assert_eq!(value[2], 3, "two voters");
    value[2] = 4;
    assert_eq!(
        reassignment_refusal(&value),
        "voter count exceeds the value"
    );
    // LeaderChange v0: Version (2 bytes), LeaderId (4), then Voters' compact length.
    let leader_change = LeaderChange {
        version: 0,
        leader_id: 1,
        voters: vec![1, 2],
        granting_voters: vec![],
    };
    let mut value = leader_change.encode();
    assert_eq!(value[6], 3, "two voters");
    value[6] = 4;
    assert_eq!(
        refusal(LeaderChange::decode(&value)),
        "voter count exceeds the value"
    );
}

/// The accessors of a view and of its borrowed records say what the batch holds (mutants of
/// view.rs: `crc`, `is_log_append_time`, `is_empty`, `into_bytes`, both iterators' size hints,
/// `RecordRef`'s `offset`, `timestamp` and `headers_count`).
#[test]
fn a_views_accessors_and_its_record_iterators_say_what_the_batch_holds() {
    let batch = three_record_batch().freeze();
    let view = BatchView::parse(batch.clone()).unwrap();
    let stated = u32::from_be_bytes(batch[CRC_OFFSET..CRC_OFFSET + 4].try_into().unwrap());
    assert_eq!(view.crc(), stated);
    assert_eq!(view.crc(), crc32c::crc32c(&batch[CRC_START..]));
    assert!(!view.is_log_append_time());
    assert!(!view.is_empty());
    assert_eq!(view.len(), batch.len());

    let mut records = view.records();
    let mut refs = view.record_refs();
    for left in (0..=3).rev() {
        assert_eq!(records.size_hint(), (left, Some(left)));
        assert_eq!(refs.size_hint(), (left, Some(left)));
        assert_eq!(records.next().is_some(), left > 0);
        assert_eq!(refs.next().is_some(), left > 0);
    }

    let refs: Vec<_> = view.record_refs().collect();
    let offsets: Vec<_> = refs.iter().map(|r| r.offset(view.base_offset())).collect();
    assert_eq!(offsets, [100, 101, 102]);
    let timestamps: Vec<_> = refs
        .iter()
        .map(|r| r.timestamp(view.base_timestamp()))
        .collect();
    assert_eq!(timestamps, [1_000, 999, 1_005]);
    let headers: Vec<_> = refs.iter().map(|r| r.headers_count()).collect();
    assert_eq!(headers, [0, 2, 0]);
    assert_eq!(view.into_bytes(), batch);
}

/// The byte counts a framing error names are the ones in the batch (mutants of view.rs's
/// arithmetic in `validate_records`, `read_record` and `Cursor::take`, and of the record
/// length's `< 0`, which only a record of length zero tells apart).
#[test]
fn a_records_framing_errors_name_the_bytes_they_found() {
    let plain = three_record_batch();
    let records = &plain[RECORDS_OFFSET..];

    let mut trailing = records.to_vec();
    trailing.extend_from_slice(&[0, 0, 0]);
    assert_eq!(
        BatchView::parse(with_records(&plain, &trailing)),
        Err(RecordError::TrailingBytes {
            offset: plain.len(),
            extra: 3
        })
    );

    let mut empty_first = records.to_vec();
    empty_first[0] = 0; // record 0's Length: zero, so its Attributes byte is past its end
    assert_eq!(
        BatchView::parse(with_records(&plain, &empty_first)),
        Err(RecordError::RecordOverrun {
            record: 0,
            offset: RECORDS_OFFSET + 1,
            needed: 1,
            available: 0
        })
    );

    // One record whose Length counts two bytes more than its fields use.
    let mut builder = RecordBatchBuilder::new(0, 0);
    builder.append(0, Some(b"k"), Some(b"value"), &[]);
    let single = builder.build();
    let body = &single[RECORDS_OFFSET + 1..];
    assert!(body.len() + 2 < 64, "a one-byte varint");
    let mut padded = vec![((body.len() + 2) * 2) as u8];
    padded.extend_from_slice(body);
    padded.extend_from_slice(&[0, 0]);
    assert_eq!(
        BatchView::parse(with_records(&single, &padded)),
        Err(RecordError::RecordLengthMismatch {
            record: 0,
            offset: RECORDS_OFFSET,
            declared: body.len() + 2,
            used: body.len()
        })
    );
}

/// A compressed batch whose decompressed records could not hold its record count at the
/// smallest record size is refused as a count mismatch before its records are read (mutant:
/// `/` turned into `*` in `BatchView::parse`, which reads on and fails differently).
#[test]
fn a_compressed_batch_whose_count_its_records_cannot_hold_is_a_count_mismatch() {
    let mut plain = three_record_batch();
    let records = plain[RECORDS_OFFSET..].to_vec();
    let count = records.len() / 7 + 1;
    assert!(count < 128);
    plain[60] = count as u8; // RecordsCount
    plain[26] = (count - 1) as u8; // LastOffsetDelta
    assert_eq!(
        BatchView::parse(zstd_batch(&plain, &records)),
        Err(RecordError::RecordCountMismatch {
            records_count: count as i32,
            last_offset_delta: count as i32 - 1
        })
    );
}
