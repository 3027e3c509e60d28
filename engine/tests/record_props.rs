//! Property tests of engine::record: builder -> parse round trips, control records, and that
//! corruption and truncation are always rejected with an error (never a panic).

use bytes::{Bytes, BytesMut};
use engine::base::DirectoryId;
use engine::record::control::{ControlRecord, LeaderChange, ProducerIdBlock, QuorumReassignment};
use engine::record::varint;
use engine::record::{
    peek_batch_len, BatchHeader, BatchIter, BatchView, RecordBatchBuilder, RecordError, CRC_OFFSET,
    CRC_START, RECORDS_OFFSET,
};
use proptest::prelude::*;

mod record_support;
use record_support::{leader_change, TestRecord};

/// Asserts (in a proptest) that control message `message` of type `$kind` decodes from its
/// value, and from a control batch written at `base_offset`, `epoch` and `timestamp` both as
/// itself and as the batch's one ControlRecord; gives that batch's view.
macro_rules! prop_assert_round_trips {
    ($kind:ident, $message:expr, $base_offset:expr, $epoch:expr, $timestamp:expr) => {{
        let message = $message;
        prop_assert_eq!($kind::decode(&message.encode()), Ok(message.clone()));
        let batch = message.to_batch($base_offset, $epoch, $timestamp);
        let view = BatchView::parse(batch.freeze()).unwrap();
        prop_assert_eq!($kind::from_batch(&view), Ok(message.clone()));
        prop_assert_eq!(
            ControlRecord::decode_batch(&view),
            Ok(vec![ControlRecord::$kind(message)])
        );
        view
    }};
}

fn payload() -> impl Strategy<Value = Option<Vec<u8>>> {
    prop_oneof![
        3 => proptest::option::of(proptest::collection::vec(any::<u8>(), 0..48)),
        1 => Just(Some(Vec::new())),
        1 => proptest::option::of(proptest::collection::vec(any::<u8>(), 100..5_000)),
    ]
}

fn timestamp() -> impl Strategy<Value = i64> {
    prop_oneof![
        4 => 1_600_000_000_000i64..1_900_000_000_000,
        1 => Just(-1i64),
        1 => any::<i64>(),
    ]
}

fn test_record() -> impl Strategy<Value = TestRecord> {
    let header = (
        "[a-z\u{e9}\u{4e2d}]{0,12}",
        proptest::option::of(proptest::collection::vec(any::<u8>(), 0..24)),
    );
    (
        timestamp(),
        payload(),
        payload(),
        proptest::collection::vec(header, 0..4),
    )
        .prop_map(|(timestamp, key, value, headers)| TestRecord {
            timestamp,
            key,
            value,
            headers,
        })
}

#[derive(Clone, Debug)]
struct BatchSpec {
    base_offset: i64,
    epoch: i32,
    control: bool,
    producer: (i64, i16, i32),
    records: Vec<TestRecord>,
}

fn batch_spec(max_records: usize) -> impl Strategy<Value = BatchSpec> {
    (
        0i64..i64::MAX / 2,
        0i32..i32::MAX,
        any::<bool>(),
        (any::<i64>(), any::<i16>(), any::<i32>()),
        proptest::collection::vec(test_record(), 1..max_records),
    )
        .prop_map(
            |(base_offset, epoch, control, producer, records)| BatchSpec {
                base_offset,
                epoch,
                control,
                producer,
                records,
            },
        )
}

fn build(spec: &BatchSpec) -> BytesMut {
    let mut builder = RecordBatchBuilder::new(spec.base_offset, spec.epoch)
        .control(spec.control)
        .producer(spec.producer.0, spec.producer.1, spec.producer.2);
    for record in &spec.records {
        record.append_to(&mut builder);
    }
    assert_eq!(builder.len(), spec.records.len());
    let size = builder.estimated_size();
    let batch = builder.build();
    assert_eq!(batch.len(), size);
    batch
}

fn assert_matches_spec(view: &BatchView, spec: &BatchSpec) {
    assert_eq!(view.base_offset(), spec.base_offset);
    assert_eq!(view.partition_leader_epoch(), spec.epoch);
    assert_eq!(view.record_count() as usize, spec.records.len());
    assert_eq!(
        view.last_offset(),
        spec.base_offset + spec.records.len() as i64 - 1
    );
    assert_eq!(view.is_control(), spec.control);
    assert_eq!(view.producer_id(), spec.producer.0);
    assert_eq!(view.producer_epoch(), spec.producer.1);
    assert_eq!(view.base_sequence(), spec.producer.2);
    assert_eq!(view.base_timestamp(), spec.records[0].timestamp);
    let max = spec.records.iter().map(|r| r.timestamp).max().unwrap();
    assert_eq!(view.max_timestamp(), max.max(-1));
    let records: Vec<_> = view.records().collect();
    assert_eq!(records.len(), spec.records.len());
    assert_eq!(view.record_refs().len(), records.len());
    for (owned, borrowed) in records.iter().zip(view.record_refs()) {
        assert_eq!(owned.offset_delta, borrowed.offset_delta);
        assert_eq!(owned.timestamp_delta, borrowed.timestamp_delta);
        assert_eq!(owned.key.as_deref(), borrowed.key);
        assert_eq!(owned.value.as_deref(), borrowed.value);
        let headers: Vec<_> = borrowed.headers().collect();
        assert_eq!(headers.len(), owned.headers.len());
        for ((key, value), (owned_key, owned_value)) in headers.iter().zip(&owned.headers) {
            assert_eq!(key.as_bytes(), &owned_key[..]);
            assert_eq!(*value, owned_value.as_deref());
        }
    }
    for (index, (got, want)) in records.iter().zip(&spec.records).enumerate() {
        assert_eq!(got.offset_delta, index as i32);
        assert_eq!(
            got.offset(view.base_offset()),
            spec.base_offset + index as i64
        );
        assert_eq!(got.timestamp(view.base_timestamp()), want.timestamp);
        assert_eq!(got.key.as_deref(), want.key.as_deref());
        assert_eq!(got.value.as_deref(), want.value.as_deref());
        assert_eq!(got.headers.len(), want.headers.len());
        for ((got_key, got_value), (want_key, want_value)) in got.headers.iter().zip(&want.headers)
        {
            assert_eq!(&got_key[..], want_key.as_bytes());
            assert_eq!(got_value.as_deref(), want_value.as_deref());
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn built_batches_parse_to_the_same_records(spec in batch_spec(24)) {
        let batch = build(&spec);
        let view = BatchView::parse(batch.freeze()).unwrap();
        assert_matches_spec(&view, &spec);
        let raft = view.to_raft_batch();
        prop_assert_eq!(raft.end_offset(), view.next_offset());
    }

    #[test]
    fn peek_and_header_agree_with_parse(spec in batch_spec(8)) {
        let batch = build(&spec);
        prop_assert_eq!(peek_batch_len(&batch), Ok(Some(batch.len())));
        let header = BatchHeader::read(&batch).unwrap();
        let view = BatchView::parse(batch.freeze()).unwrap();
        prop_assert_eq!(&header, view.header());
    }

    #[test]
    fn leader_change_round_trips(
        message in leader_change(12),
        base_offset in 0i64..1 << 40,
        epoch in 0i32..i32::MAX,
        timestamp in timestamp(),
    ) {
        let view = prop_assert_round_trips!(LeaderChange, message, base_offset, epoch, timestamp);
        prop_assert!(view.is_control());
        prop_assert_eq!(view.base_offset(), base_offset);
        prop_assert_eq!(view.partition_leader_epoch(), epoch);
        prop_assert_eq!(view.base_timestamp(), timestamp);
    }

    #[test]
    fn quorum_reassignment_round_trips(
        cluster_id in "\\PC{0,40}",
        current_voters in proptest::collection::vec(any::<i32>(), 0..12),
        target_voters in proptest::option::of(proptest::collection::vec(any::<i32>(), 0..12)),
        base_offset in 0i64..1 << 40,
        epoch in 0i32..i32::MAX,
        directories in proptest::collection::vec(proptest::option::of(any::<[u8; 16]>()), 0..12),
    ) {
        // A directory for some voters of each list (a nil one binds nothing and is not written).
        let bind = |ids: &[i32]| -> std::collections::BTreeMap<i32, DirectoryId> {
            ids.iter()
                .zip(&directories)
                .filter_map(|(id, d)| Some((*id, DirectoryId((*d)?))))
                .filter(|(_, d)| !d.is_zero())
                .collect()
        };
        let current_directories = bind(&current_voters);
        let target_directories = target_voters.as_deref().map(bind).unwrap_or_default();
        let message = QuorumReassignment {
            cluster_id,
            current_voters,
            target_voters,
            force: base_offset % 2 == 0,
            current_directories,
            target_directories,
        };
        prop_assert_round_trips!(QuorumReassignment, message, base_offset, epoch, 1);
    }

    #[test]
    fn producer_id_blocks_round_trip_and_truncations_are_errors(
        node_id in any::<i32>(),
        incarnation in any::<u64>(),
        first_id in 0i64..i64::MAX / 2,
        count in 1i32..i32::MAX,
        base_offset in 0i64..1 << 40,
        epoch in 0i32..i32::MAX,
    ) {
        let block = ProducerIdBlock { node_id, incarnation, first_id, count };
        let view = prop_assert_round_trips!(ProducerIdBlock, block, base_offset, epoch, 1);
        prop_assert!(view.is_control());
        let value = block.encode();
        for len in 0..value.len() {
            prop_assert!(ProducerIdBlock::decode(&value[..len]).is_err());
        }
        // Blocks that are not ranges of non-negative ids are refused.
        for (first_id, count) in [(-1, count), (first_id, 0), (first_id, -count), (i64::MAX - 1, 2)] {
            let bad = ProducerIdBlock { node_id, incarnation, first_id, count };
            prop_assert!(ProducerIdBlock::decode(&bad.encode()).is_err());
        }
    }

    #[test]
    fn truncated_control_values_are_errors(
        voters in proptest::collection::vec(any::<i32>(), 0..6),
        target_voters in proptest::option::of(proptest::collection::vec(any::<i32>(), 0..6)),
    ) {
        let leader_change = LeaderChange { version: 0, leader_id: 1, voters: voters.clone(), granting_voters: voters.clone() }.encode();
        for len in 0..leader_change.len() {
            prop_assert!(LeaderChange::decode(&leader_change[..len]).is_err());
        }
        let current_directories = voters.iter().map(|&v| (v, DirectoryId([7; 16]))).collect();
        let reassignment = QuorumReassignment {
            cluster_id: "c".into(),
            current_voters: voters,
            target_voters,
            force: true,
            current_directories,
            target_directories: Default::default(),
        }
        .encode();
        for len in 0..reassignment.len() {
            prop_assert!(QuorumReassignment::decode(&reassignment[..len]).is_err());
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// CRC-32C detects every error confined to 32 consecutive bits, so every change of one byte
    /// in the covered region, and of the CRC itself, must be caught.
    #[test]
    fn every_single_byte_corruption_is_rejected(spec in batch_spec(6), xor in 1u8..=255) {
        let batch = build(&spec);
        prop_assume!(batch.len() < 12_000);
        for index in CRC_OFFSET..batch.len() {
            let mut corrupt = batch.clone();
            corrupt[index] ^= xor;
            let result = BatchView::parse(corrupt.freeze());
            prop_assert!(
                matches!(result, Err(RecordError::CrcMismatch { .. })),
                "byte {} xor {:#04x}: {:?}", index, xor, result
            );
        }
    }

    /// The header fields before the CRC: BatchLength and Magic are checked, BaseOffset and
    /// PartitionLeaderEpoch are deliberately outside the CRC (the leader stamps them).
    #[test]
    fn corruption_before_the_crc(spec in batch_spec(4), xor in 1u8..=255) {
        let batch = build(&spec);
        for index in 0..CRC_OFFSET {
            let mut corrupt = batch.clone();
            corrupt[index] ^= xor;
            let result = BatchView::parse(corrupt.freeze());
            match index {
                0..=7 | 12..=15 => prop_assert!(result.is_ok()),
                8..=11 => prop_assert!(matches!(result, Err(RecordError::BadLength { .. } | RecordError::TooShort { .. })), "{:?}", result),
                _ => prop_assert!(matches!(result, Err(RecordError::BadMagic { .. })), "{:?}", result),
            }
        }
    }

    #[test]
    fn every_truncation_is_an_error(spec in batch_spec(6)) {
        let batch = build(&spec).freeze();
        prop_assume!(batch.len() < 12_000);
        for len in 0..batch.len() {
            let prefix = batch.slice(..len);
            let error = BatchView::parse(prefix.clone()).unwrap_err();
            prop_assert!(error.is_incomplete(), "prefix of {} bytes: {}", len, error);
            match peek_batch_len(&prefix) {
                Ok(None) => prop_assert!(len < 12),
                Ok(Some(total)) => prop_assert_eq!(total, batch.len()),
                Err(error) => prop_assert!(false, "peek failed on a valid prefix: {}", error),
            }
            let _ = BatchHeader::read(&prefix);
        }
    }

    /// Mutations of the record region with a recomputed CRC reach the framing checks: they may
    /// be accepted (the change kept the framing valid) but must never panic, and an accepted
    /// batch iterates to exactly its record count.
    #[test]
    fn mutated_records_with_a_valid_crc_never_panic(
        spec in batch_spec(6),
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
    ) {
        let mut batch = build(&spec);
        let region = batch.len() - RECORDS_OFFSET;
        for (index, byte) in edits {
            batch[RECORDS_OFFSET + index.index(region)] = byte;
        }
        let crc = crc32c::crc32c(&batch[CRC_START..]);
        batch[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
        if let Ok(view) = BatchView::parse(batch.freeze()) {
            prop_assert_eq!(view.records().count(), view.record_count() as usize);
            let _ = ControlRecord::decode_batch(&view);
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = peek_batch_len(&bytes);
        let _ = BatchHeader::read(&bytes);
        if let Ok(view) = BatchView::parse(Bytes::from(bytes.clone())) {
            prop_assert_eq!(view.records().count(), view.record_count() as usize);
        }
        let _ = LeaderChange::decode(&bytes);
        let _ = QuorumReassignment::decode(&bytes);
    }

    #[test]
    fn varints_round_trip(u in any::<u32>(), ul in any::<u64>(), i in any::<i32>(), l in any::<i64>()) {
        let mut out = Vec::new();
        varint::put_uvarint(&mut out, u);
        varint::put_uvarlong(&mut out, ul);
        varint::put_varint(&mut out, i);
        varint::put_varlong(&mut out, l);
        let (got_u, a) = varint::get_uvarint(&out).unwrap();
        let (got_ul, b) = varint::get_uvarlong(&out[a..]).unwrap();
        let (got_i, c) = varint::get_varint(&out[a + b..]).unwrap();
        let (got_l, d) = varint::get_varlong(&out[a + b + c..]).unwrap();
        prop_assert_eq!((got_u, got_ul, got_i, got_l), (u, ul, i, l));
        prop_assert_eq!(a + b + c + d, out.len());
        prop_assert_eq!(a, varint::uvarint_len(u));
        prop_assert_eq!(b, varint::uvarlong_len(ul));
        prop_assert_eq!(c, varint::varint_len(i));
        prop_assert_eq!(d, varint::varlong_len(l));
        // Every strict prefix of a varint is a truncation.
        for len in 0..d {
            prop_assert_eq!(
                varint::get_varlong(&out[a + b + c..a + b + c + len]),
                Err(varint::VarintError::Truncated { read: len })
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Back-to-back batches split exactly; a cut anywhere yields the whole batches before it,
    /// then (unless the cut is on a boundary) an error positioned at the cut batch's start.
    #[test]
    fn batch_iter_splits_and_stops_at_the_first_bad_batch(
        specs in proptest::collection::vec(batch_spec(4), 1..5),
        cut in any::<prop::sample::Index>(),
        flip in any::<prop::sample::Index>(),
    ) {
        let batches: Vec<Bytes> = specs.iter().map(|spec| build(spec).freeze()).collect();
        let mut boundaries = vec![0usize];
        let mut all = Vec::new();
        for batch in &batches {
            all.extend_from_slice(batch);
            boundaries.push(all.len());
        }
        let all = Bytes::from(all);

        let mut iter = BatchIter::new(all.clone());
        let got: Vec<_> = iter.by_ref().map(Result::unwrap).collect();
        prop_assert_eq!(got.len(), batches.len());
        for (view, batch) in got.iter().zip(&batches) {
            prop_assert_eq!(view.bytes(), batch);
        }
        prop_assert!(!iter.failed());
        prop_assert_eq!(iter.position(), all.len());
        // The stored-batch split finds the same batches with the same header fields.
        let stored: Vec<_> = BatchIter::new(all.clone()).stored().map(Result::unwrap).collect();
        let from_views: Vec<_> = got.iter().map(BatchView::to_raft_batch).collect();
        prop_assert_eq!(stored, from_views);

        let cut = cut.index(all.len());
        let whole = boundaries.iter().filter(|&&b| b > 0 && b <= cut).count();
        let mut iter = BatchIter::new(all.slice(..cut));
        let results: Vec<_> = iter.by_ref().collect();
        prop_assert_eq!(results.iter().filter(|r| r.is_ok()).count(), whole);
        let on_boundary = boundaries.contains(&cut);
        prop_assert_eq!(iter.failed(), !on_boundary);
        prop_assert_eq!(results.len(), whole + usize::from(!on_boundary));
        prop_assert_eq!(iter.position(), boundaries[whole]);
        let mut stored = BatchIter::new(all.slice(..cut)).stored();
        let results: Vec<_> = stored.by_ref().collect();
        prop_assert_eq!(results.iter().filter(|r| r.is_ok()).count(), whole);
        prop_assert_eq!(results.len(), whole + usize::from(!on_boundary));
        prop_assert_eq!(stored.position(), boundaries[whole]);

        // Corrupt one byte of the CRC-covered part of some batch: the batches before it survive.
        let mut corrupt = all.to_vec();
        let at = flip.index(all.len());
        let batch = boundaries.iter().rposition(|&b| b <= at).unwrap();
        prop_assume!(at - boundaries[batch] >= CRC_OFFSET);
        corrupt[at] ^= 0x40;
        let corrupt = Bytes::from(corrupt);
        let mut iter = BatchIter::new(corrupt.clone());
        let results: Vec<_> = iter.by_ref().collect();
        prop_assert_eq!(results.len(), batch + 1);
        prop_assert!(results[..batch].iter().all(Result::is_ok));
        prop_assert!(results[batch].is_err());
        prop_assert_eq!(iter.position(), boundaries[batch]);
        // The CRC alone catches the same damage.
        let mut stored = BatchIter::new(corrupt).stored();
        let results: Vec<_> = stored.by_ref().collect();
        prop_assert_eq!(results.len(), batch + 1);
        prop_assert!(results[batch].is_err());
        prop_assert_eq!(stored.position(), boundaries[batch]);
    }
}

#[test]
fn thousands_of_records_round_trip() {
    let spec = BatchSpec {
        base_offset: 1 << 33,
        epoch: 9,
        control: false,
        producer: (-1, -1, -1),
        records: (0..5_000)
            .map(|i| TestRecord {
                timestamp: 1_700_000_000_000 + i,
                key: Some(i.to_be_bytes().to_vec()),
                value: Some(vec![i as u8; (i % 300) as usize]),
                headers: if i % 7 == 0 {
                    vec![("trace".to_string(), Some(b"id".to_vec()))]
                } else {
                    Vec::new()
                },
            })
            .collect(),
    };
    let view = BatchView::parse(build(&spec).freeze()).unwrap();
    assert_matches_spec(&view, &spec);
}
