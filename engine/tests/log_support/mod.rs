//! Shared helpers for the log, writer and crash tests.
#![allow(dead_code)]

use bytes::Bytes;
use engine::log::{Log, LogConfig};

/// A RecordBatch v2 with `records` records of `value_len`-byte values.
/// INTERIM: encodes the batch by hand until engine::record's builder lands on main.
pub fn batch(base_offset: i64, epoch: i32, records: u32, value_len: usize) -> Bytes {
    let mut body = Vec::new();
    for i in 0..records {
        let mut record = Vec::new();
        record.push(0u8); // attributes
        zigzag(&mut record, 0); // timestamp delta
        zigzag(&mut record, i64::from(i)); // offset delta
        zigzag(&mut record, -1); // null key
        zigzag(&mut record, value_len as i64);
        record.extend((0..value_len).map(|j| (j as u8) ^ (base_offset as u8) ^ (i as u8)));
        zigzag(&mut record, 0); // headers
        zigzag(&mut body, record.len() as i64);
        body.extend_from_slice(&record);
    }
    let mut out = Vec::with_capacity(61 + body.len());
    out.extend_from_slice(&base_offset.to_be_bytes());
    out.extend_from_slice(&((49 + body.len()) as i32).to_be_bytes());
    out.extend_from_slice(&epoch.to_be_bytes());
    out.push(2);
    out.extend_from_slice(&[0; 4]); // crc, filled below
    out.extend_from_slice(&0i16.to_be_bytes());
    out.extend_from_slice(&(records as i32 - 1).max(0).to_be_bytes());
    out.extend_from_slice(&1_700_000_000_000i64.to_be_bytes());
    out.extend_from_slice(&1_700_000_000_000i64.to_be_bytes());
    out.extend_from_slice(&(-1i64).to_be_bytes());
    out.extend_from_slice(&(-1i16).to_be_bytes());
    out.extend_from_slice(&(-1i32).to_be_bytes());
    out.extend_from_slice(&(records as i32).to_be_bytes());
    out.extend_from_slice(&body);
    let crc = crc32c::crc32c(&out[21..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    Bytes::from(out)
}

fn zigzag(out: &mut Vec<u8>, v: i64) {
    let mut u = ((v << 1) ^ (v >> 63)) as u64;
    while u >= 0x80 {
        out.push((u as u8) | 0x80);
        u >>= 7;
    }
    out.push(u as u8);
}

/// Base offset, epoch and record count of a stored batch.
pub fn header(batch: &[u8]) -> (i64, i32, u32) {
    let base = i64::from_be_bytes(batch[0..8].try_into().unwrap());
    let epoch = i32::from_be_bytes(batch[12..16].try_into().unwrap());
    let count = i32::from_be_bytes(batch[57..61].try_into().unwrap());
    (base, epoch, count as u32)
}

/// Whether a stored batch's CRC-32C matches.
pub fn crc_ok(batch: &[u8]) -> bool {
    let stored = u32::from_be_bytes(batch[17..21].try_into().unwrap());
    crc32c::crc32c(&batch[21..]) == stored
}

/// A small-segment config so tests roll often.
pub fn small_config(segment_bytes: u64) -> LogConfig {
    LogConfig {
        segment_bytes,
        ..LogConfig::default()
    }
}

/// Appends `count` batches of `records` records each in `epoch`, one `append` call each.
pub fn append_batches(
    log: &mut Log,
    count: usize,
    epoch: i32,
    records: u32,
    value_len: usize,
) -> Vec<Bytes> {
    let mut written = Vec::new();
    for _ in 0..count {
        let b = batch(log.end_offset(), epoch, records, value_len);
        log.append(std::slice::from_ref(&b)).unwrap();
        written.push(b);
    }
    written
}

/// Every batch of the log, read in `max_bytes` steps.
pub fn read_all(log: &Log) -> Vec<Bytes> {
    let mut out = Vec::new();
    let mut next = log.start_offset();
    loop {
        let got = log.read(next, 64 << 10).unwrap();
        let Some(last) = got.last() else { break };
        let (base, _, count) = header(last);
        next = base + i64::from(count);
        out.extend(got);
    }
    out
}
