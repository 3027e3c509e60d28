//! Arbitrary bytes into the record-batch and control-record decoders: they must return errors,
//! never panic, and whatever they accept must be self-consistent.
//!
//! The first byte picks a mode. In "raw" mode the rest goes to `BatchView::parse` as is; almost
//! every input then dies at the CRC check. In "sealed" mode the rest gets a plausible header
//! (magic 2, BatchLength of the input, a correct CRC) so the fuzzer explores the record framing.

#![no_main]

use bytes::Bytes;
use engine::record::control::{ControlRecord, ControlRecordType, LeaderChange, QuorumReassignment};
use engine::record::{
    peek_batch_len, BatchHeader, BatchIter, BatchView, BATCH_HEADER_LEN, BATCH_LENGTH_OFFSET,
    CRC_OFFSET, CRC_START, LOG_OVERHEAD, MAGIC, MAGIC_OFFSET,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    match mode % 4 {
        0 => {
            check_batch(rest.to_vec());
            check_scan(rest);
        }
        1 | 2 => check_batch(sealed(rest)),
        _ => check_control_values(rest),
    }
});

/// `rest` with magic, BatchLength and CRC made consistent.
fn sealed(rest: &[u8]) -> Vec<u8> {
    let mut batch = rest.to_vec();
    if batch.len() < BATCH_HEADER_LEN {
        return batch;
    }
    let batch_length = (batch.len() - LOG_OVERHEAD) as i32;
    batch[BATCH_LENGTH_OFFSET..BATCH_LENGTH_OFFSET + 4]
        .copy_from_slice(&batch_length.to_be_bytes());
    batch[MAGIC_OFFSET] = MAGIC as u8;
    let crc = crc32c::crc32c(&batch[CRC_START..]);
    batch[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
    batch
}

fn check_batch(batch: Vec<u8>) {
    let peeked = peek_batch_len(&batch);
    let header = BatchHeader::read(&batch);
    let Ok(view) = BatchView::parse(Bytes::from(batch)) else {
        return;
    };
    // What parse accepts, the cheaper checks accept too, with the same answer.
    assert_eq!(peeked, Ok(Some(view.len())));
    assert_eq!(header.as_ref(), Ok(view.header()));

    let mut count = 0u32;
    let range = view.bytes().as_ptr_range();
    for (index, record) in view.records().enumerate() {
        assert_eq!(record.offset_delta as usize, index);
        for part in [&record.key, &record.value].into_iter().flatten() {
            assert!(part.is_empty() || range.contains(&part.as_ptr()));
        }
        for (key, _) in &record.headers {
            assert!(std::str::from_utf8(key).is_ok());
        }
        count += 1;
    }
    assert_eq!(count, view.record_count());
    for (record, borrowed) in view.records().zip(view.record_refs()) {
        assert_eq!(record.key.as_deref(), borrowed.key);
        assert_eq!(record.value.as_deref(), borrowed.value);
        assert_eq!(record.headers.len(), borrowed.headers().count());
    }
    let raft = view.to_raft_batch();
    assert_eq!(raft.end_offset(), view.next_offset());
    if view.is_control() {
        let _ = ControlRecord::decode_batch(&view);
        let _ = LeaderChange::from_batch(&view);
        let _ = QuorumReassignment::from_batch(&view);
    }
}

/// Splitting a buffer of batches stops at the first bad one and never overruns.
fn check_scan(bytes: &[u8]) {
    let mut iter = BatchIter::new(Bytes::copy_from_slice(bytes));
    let mut end = 0;
    for result in iter.by_ref() {
        match result {
            Ok(view) => end += view.len(),
            Err(_) => break,
        }
    }
    assert_eq!(iter.position(), end);
    assert!(end <= bytes.len());
    assert_eq!(iter.failed(), end != bytes.len());
    assert!(iter.next().is_none());
}

fn check_control_values(value: &[u8]) {
    let _ = ControlRecordType::from_key(Some(value), 0);
    // Whatever decodes must encode back to a value that decodes to the same message.
    if let Ok(message) = LeaderChange::decode(value) {
        assert_eq!(LeaderChange::decode(&message.encode()), Ok(message));
    }
    if let Ok(message) = QuorumReassignment::decode(value) {
        assert_eq!(QuorumReassignment::decode(&message.encode()), Ok(message));
    }
}
