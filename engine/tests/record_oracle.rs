//! engine::record checked against an independent implementation, the `kafka-protocol` crate:
//! batches we build decode there to the same records, batches it encodes parse here to the same
//! records, and with identical inputs the two encoders produce identical bytes. Same for the
//! LeaderChange control record value (Kafka's LeaderChangeMessage).

use bytes::{Bytes, BytesMut};
use engine::record::control::{ControlRecordType, LeaderChange};
use engine::record::{BatchView, RecordBatchBuilder};
use kafka_protocol::messages::leader_change_message::Voter;
use kafka_protocol::messages::{BrokerId, LeaderChangeMessage};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use kafka_protocol::records::{
    Compression, Record as KRecord, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions,
    TimestampType,
};
use proptest::prelude::*;

mod record_support;
use record_support::{leader_change, TestRecord};

/// What both encoders are given. Header keys are unique per record: kafka-protocol keeps headers
/// in a map.
#[derive(Clone, Debug)]
struct Input {
    base_offset: i64,
    epoch: i32,
    control: bool,
    transactional: bool,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    records: Vec<TestRecord>,
}

fn payload() -> impl Strategy<Value = Option<Vec<u8>>> {
    prop_oneof![
        4 => proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40)),
        1 => proptest::option::of(proptest::collection::vec(any::<u8>(), 200..3_000)),
    ]
}

fn input_record() -> impl Strategy<Value = TestRecord> {
    (
        // Kafka timestamps are -1 (none) or milliseconds since the epoch.
        prop_oneof![1 => Just(-1i64), 6 => 0i64..1 << 42],
        payload(),
        payload(),
        proptest::collection::btree_map(
            "[a-z0-9.\u{e9}]{0,10}",
            proptest::option::of(proptest::collection::vec(any::<u8>(), 0..16)),
            0..4,
        ),
    )
        .prop_map(|(timestamp, key, value, headers)| TestRecord {
            timestamp,
            key,
            value,
            headers: headers.into_iter().collect(),
        })
}

fn input() -> impl Strategy<Value = Input> {
    (
        (0i64..1 << 50, 0i32..i32::MAX, any::<bool>(), any::<bool>()),
        (
            prop_oneof![Just(-1i64), 0i64..1 << 40],
            prop_oneof![Just(-1i16), 0i16..i16::MAX],
            prop_oneof![Just(-1i32), 0i32..1 << 30],
        ),
        proptest::collection::vec(input_record(), 1..20),
    )
        .prop_map(
            |(
                (base_offset, epoch, control, transactional),
                (producer_id, producer_epoch, base_sequence),
                records,
            )| Input {
                base_offset,
                epoch,
                control,
                transactional,
                producer_id,
                producer_epoch,
                base_sequence,
                records,
            },
        )
}

/// Encodes with our builder. kafka-protocol uses the smallest timestamp as BaseTimestamp (Java
/// Kafka uses the first record's); with `match_base_timestamp` we do the same, for byte equality.
fn build_ours(input: &Input, match_base_timestamp: bool) -> BytesMut {
    let mut builder = RecordBatchBuilder::new(input.base_offset, input.epoch)
        .control(input.control)
        .transactional(input.transactional)
        .producer(input.producer_id, input.producer_epoch, input.base_sequence);
    if match_base_timestamp {
        let min = input.records.iter().map(|r| r.timestamp).min().unwrap();
        builder = builder.base_timestamp(min);
    }
    for record in &input.records {
        record.append_to(&mut builder);
    }
    builder.build()
}

fn kafka_records(input: &Input) -> Vec<KRecord> {
    input
        .records
        .iter()
        .enumerate()
        .map(|(index, record)| {
            let mut krecord = KRecord {
                transactional: input.transactional,
                control: input.control,
                delete_horizon: false,
                partition_leader_epoch: input.epoch,
                producer_id: input.producer_id,
                producer_epoch: input.producer_epoch,
                timestamp_type: TimestampType::Creation,
                offset: input.base_offset + index as i64,
                sequence: input.base_sequence.wrapping_add(index as i32),
                timestamp: record.timestamp,
                key: record.key.clone().map(Bytes::from),
                value: record.value.clone().map(Bytes::from),
                headers: Default::default(),
            };
            for (key, value) in &record.headers {
                krecord.headers.insert(
                    StrBytes::from_string(key.clone()),
                    value.clone().map(Bytes::from),
                );
            }
            krecord
        })
        .collect()
}

fn encode_kafka(input: &Input) -> BytesMut {
    encode_kafka_compressed(input, Compression::None)
}

/// The batch kafka-protocol writes for `input` with `compression` (as a Kafka client would).
fn encode_kafka_compressed(input: &Input, compression: Compression) -> BytesMut {
    let options = RecordEncodeOptions {
        version: 2,
        compression,
    };
    let mut out = BytesMut::new();
    RecordBatchEncoder::encode(&mut out, &kafka_records(input), &options).unwrap();
    out
}

fn assert_same_records(ours: &BatchView, theirs: &[KRecord], input: &Input) {
    assert_eq!(ours.record_count() as usize, theirs.len());
    assert_eq!(theirs.len(), input.records.len());
    for ((record, krecord), want) in ours.records().zip(theirs).zip(&input.records) {
        assert_eq!(record.offset(ours.base_offset()), krecord.offset);
        assert_eq!(record.timestamp(ours.base_timestamp()), krecord.timestamp);
        assert_eq!(krecord.timestamp, want.timestamp);
        assert_eq!(record.key, krecord.key);
        assert_eq!(record.value, krecord.value);
        assert_eq!(record.headers.len(), krecord.headers.len());
        for ((key, value), (kkey, kvalue)) in record.headers.iter().zip(&krecord.headers) {
            assert_eq!(&key[..], kkey.as_bytes());
            assert_eq!(value, kvalue);
        }
        assert_eq!(krecord.control, ours.is_control());
        assert_eq!(krecord.transactional, ours.is_transactional());
        assert_eq!(
            krecord.partition_leader_epoch,
            ours.partition_leader_epoch()
        );
        assert_eq!(krecord.producer_id, ours.producer_id());
        assert_eq!(krecord.producer_epoch, ours.producer_epoch());
        assert_eq!(
            krecord.sequence,
            ours.base_sequence().wrapping_add(record.offset_delta)
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn our_batches_decode_in_kafka_protocol(input in input()) {
        let ours = build_ours(&input, false).freeze();
        let view = BatchView::parse(ours.clone()).unwrap();
        let mut buf = ours;
        let decoded = RecordBatchDecoder::decode(&mut buf).unwrap();
        prop_assert!(buf.is_empty());
        prop_assert_eq!(decoded.version, 2);
        assert_same_records(&view, &decoded.records, &input);
    }

    #[test]
    fn kafka_protocol_batches_parse_here(input in input()) {
        let theirs = encode_kafka(&input).freeze();
        let view = BatchView::parse(theirs.clone()).unwrap();
        prop_assert_eq!(view.base_offset(), input.base_offset);
        prop_assert_eq!(view.len(), theirs.len());
        assert_same_records(&view, &kafka_records(&input), &input);
    }

    /// Compressed batches from kafka-protocol (gzip, xerial snappy, lz4 frames, zstd) parse
    /// here to the same records, and are kept as they came: the view's bytes are the input's.
    #[test]
    fn compressed_kafka_protocol_batches_parse_here(input in input(), codec in 0usize..4) {
        let (compression, ours) = [
            (Compression::Gzip, engine::record::compression::Compression::Gzip),
            (Compression::Snappy, engine::record::compression::Compression::Snappy),
            (Compression::Lz4, engine::record::compression::Compression::Lz4),
            (Compression::Zstd, engine::record::compression::Compression::Zstd),
        ][codec];
        let theirs = encode_kafka_compressed(&input, compression).freeze();
        let view = BatchView::parse(theirs.clone()).unwrap();
        prop_assert_eq!(view.compression(), ours);
        prop_assert_eq!(view.bytes(), &theirs);
        prop_assert_eq!(view.record_refs().count(), input.records.len());
        assert_same_records(&view, &kafka_records(&input), &input);
    }

    #[test]
    fn identical_inputs_give_identical_bytes(input in input()) {
        let ours = build_ours(&input, true);
        let theirs = encode_kafka(&input);
        prop_assert_eq!(&ours[..], &theirs[..]);
    }

    #[test]
    fn leader_change_value_is_kafkas(ours in leader_change(8)) {
        let version = ours.version;
        let to_voters = |ids: &[i32]| ids.iter().map(|&id| Voter::default().with_voter_id(id)).collect::<Vec<_>>();
        let theirs = LeaderChangeMessage::default()
            .with_version(version)
            .with_leader_id(BrokerId(ours.leader_id))
            .with_voters(to_voters(&ours.voters))
            .with_granting_voters(to_voters(&ours.granting_voters));
        let mut encoded = BytesMut::new();
        theirs.encode(&mut encoded, version).unwrap();
        prop_assert_eq!(&ours.encode()[..], &encoded[..]);
        prop_assert_eq!(LeaderChange::decode(&encoded), Ok(ours.clone()));
        let mut buf = ours.encode().freeze();
        let decoded = LeaderChangeMessage::decode(&mut buf, version).unwrap();
        prop_assert_eq!(decoded, theirs);
    }
}

#[test]
fn unknown_tagged_fields_are_skipped() {
    let voter = Voter::default()
        .with_voter_id(3)
        .with_unknown_tagged_field(7, Bytes::from_static(b"ignored"));
    let theirs = LeaderChangeMessage::default()
        .with_version(0)
        .with_leader_id(BrokerId(3))
        .with_voters(vec![voter.clone(), Voter::default().with_voter_id(4)])
        .with_granting_voters(vec![voter])
        .with_unknown_tagged_field(1, Bytes::from_static(b"a"))
        .with_unknown_tagged_field(5, Bytes::from_static(b"bcd"));
    let mut encoded = BytesMut::new();
    theirs.encode(&mut encoded, 0).unwrap();
    assert_eq!(
        LeaderChange::decode(&encoded),
        Ok(LeaderChange {
            version: 0,
            leader_id: 3,
            voters: vec![3, 4],
            granting_voters: vec![3],
        })
    );
}

/// A LeaderChange control batch written by kafka-protocol (as Kafka would) decodes here, and
/// ours decodes there to the same key and value.
#[test]
fn leader_change_control_batch_both_ways() {
    let message = LeaderChange {
        version: 0,
        leader_id: 2,
        voters: vec![1, 2, 3],
        granting_voters: vec![1, 2],
    };
    let record = KRecord {
        transactional: false,
        control: true,
        delete_horizon: false,
        partition_leader_epoch: 6,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: 40,
        sequence: -1,
        timestamp: 1_700_000_000_000,
        key: Some(Bytes::copy_from_slice(
            &ControlRecordType::LEADER_CHANGE.key(),
        )),
        value: Some(message.encode().freeze()),
        headers: Default::default(),
    };
    let mut theirs = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut theirs, [&record], &options).unwrap();
    let view = BatchView::parse(theirs.clone().freeze()).unwrap();
    assert_eq!(LeaderChange::from_batch(&view), Ok(message.clone()));

    let ours = message.to_batch(40, 6, 1_700_000_000_000);
    assert_eq!(&ours[..], &theirs[..]);
    let mut buf = ours.freeze();
    let decoded = RecordBatchDecoder::decode(&mut buf).unwrap();
    assert_eq!(decoded.records.len(), 1);
    assert!(decoded.records[0].control);
    assert_eq!(decoded.records[0].key, record.key);
    assert_eq!(decoded.records[0].value, record.value);
}
