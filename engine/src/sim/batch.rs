//! The client's payload: a real-looking Kafka RecordBatch v2 (docs/protocol.md section 13,
//! "Record batches") carrying one unique value, and the fingerprint the invariants compare
//! batches by.
//!
//! Built here rather than with `engine::record` so the simulator does not depend on the codec
//! under development; the core only stamps BaseOffset (bytes 0..8) and PartitionLeaderEpoch
//! (bytes 12..16), which the fingerprint leaves out.

use bytes::{BufMut, BytesMut};

const HEADER_LEN: usize = 61;

fn put_varint(buf: &mut BytesMut, value: i64) {
    let mut v = ((value << 1) ^ (value >> 63)) as u64; // zigzag
    while v >= 0x80 {
        buf.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    buf.put_u8(v as u8);
}

/// One record: Length, Attributes, TimestampDelta, OffsetDelta, Key (null), Value, no headers.
fn encode_record(offset_delta: i64, value: &[u8]) -> BytesMut {
    let mut body = BytesMut::new();
    body.put_i8(0);
    put_varint(&mut body, offset_delta); // timestamp delta: 1 ms per record
    put_varint(&mut body, offset_delta);
    put_varint(&mut body, -1);
    put_varint(&mut body, value.len() as i64);
    body.put_slice(value);
    put_varint(&mut body, 0);
    let mut record = BytesMut::new();
    put_varint(&mut record, body.len() as i64);
    record.put_slice(&body);
    record
}

/// A RecordBatch v2 with `record_count` records whose values are `value` (u64 BE) followed by the
/// record's index, so every batch of a run is different. BaseOffset and epoch are left 0.
pub fn client_batch(value: u64, record_count: u32, timestamp: i64) -> BytesMut {
    sequenced_batch(value, record_count, timestamp, None)
}

/// The idempotence fields of a producer's batch: producer id, producer epoch, base sequence.
pub type ProducerFields = (i64, i16, i32);

/// [`client_batch`], from an idempotent producer when `producer` is given (else with Kafka's
/// "none" in the three fields).
pub fn sequenced_batch(
    value: u64,
    record_count: u32,
    timestamp: i64,
    producer: Option<ProducerFields>,
) -> BytesMut {
    assert!(record_count >= 1);
    let (producer_id, producer_epoch, base_sequence) = producer.unwrap_or((-1, -1, -1));
    let mut records = BytesMut::new();
    for i in 0..record_count {
        let mut v = Vec::with_capacity(12);
        v.extend_from_slice(&value.to_be_bytes());
        v.extend_from_slice(&i.to_be_bytes());
        records.put_slice(&encode_record(i64::from(i), &v));
    }
    let mut batch = BytesMut::with_capacity(HEADER_LEN + records.len());
    batch.put_i64(0); // BaseOffset (stamped by the leader)
    batch.put_i32((HEADER_LEN - 12 + records.len()) as i32); // BatchLength
    batch.put_i32(0); // PartitionLeaderEpoch (stamped by the leader)
    batch.put_i8(2); // Magic
    batch.put_u32(0); // CRC, filled below
    batch.put_i16(0); // Attributes
    batch.put_i32(record_count as i32 - 1); // LastOffsetDelta
    batch.put_i64(timestamp);
    batch.put_i64(timestamp + i64::from(record_count) - 1);
    batch.put_i64(producer_id);
    batch.put_i16(producer_epoch);
    batch.put_i32(base_sequence);
    batch.put_i32(record_count as i32);
    batch.put_slice(&records);
    let crc = crc32c::crc32c(&batch[21..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
    batch
}

/// FNV-1a over every byte the leader may not change (all but BaseOffset and the epoch).
pub fn fingerprint(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for (i, &b) in bytes.iter().enumerate() {
        if i < 8 || (12..16).contains(&i) {
            continue;
        }
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// Reads BaseOffset and PartitionLeaderEpoch from a batch's header (None if it is too short).
pub fn stamped_header(bytes: &[u8]) -> Option<(i64, i32)> {
    if bytes.len() < HEADER_LEN {
        return None;
    }
    let base = i64::from_be_bytes(bytes[0..8].try_into().ok()?);
    let epoch = i32::from_be_bytes(bytes[12..16].try_into().ok()?);
    Some((base, epoch))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_header_is_consistent_and_fingerprint_ignores_stamps() {
        let mut b = client_batch(42, 3, 1000);
        assert!(b.len() > HEADER_LEN);
        let len = i32::from_be_bytes(b[8..12].try_into().unwrap()) as usize;
        assert_eq!(len + 12, b.len());
        assert_eq!(i32::from_be_bytes(b[57..61].try_into().unwrap()), 3);
        let crc = u32::from_be_bytes(b[17..21].try_into().unwrap());
        assert_eq!(crc, crc32c::crc32c(&b[21..]));
        let before = fingerprint(&b);
        b[0..8].copy_from_slice(&77i64.to_be_bytes());
        b[12..16].copy_from_slice(&5i32.to_be_bytes());
        assert_eq!(fingerprint(&b), before);
        assert_eq!(stamped_header(&b), Some((77, 5)));
        assert_ne!(fingerprint(&client_batch(43, 3, 1000)), before);
    }

    /// The simulator's producer batches read back with their idempotence fields, as the
    /// replica reads them.
    #[test]
    fn a_sequenced_batch_carries_its_producer_fields() {
        let b = sequenced_batch(9, 2, 1000, Some((1_000, 3, 17)));
        let header = crate::record::BatchHeader::read(&b).unwrap();
        assert_eq!(
            (
                header.producer_id,
                header.producer_epoch,
                header.base_sequence,
                header.last_offset_delta
            ),
            (1_000, 3, 17, 1)
        );
        let plain = crate::record::BatchHeader::read(&client_batch(9, 2, 1000)).unwrap();
        assert_eq!(plain.producer_id, -1);
    }
}
