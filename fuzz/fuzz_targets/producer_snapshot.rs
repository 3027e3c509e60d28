//! Arbitrary bytes into the producer-state snapshot decoder: errors, never a panic; whatever it
//! accepts encodes back to the same bytes (a version 1 snapshot, without committed offsets,
//! to the same snapshot in the current version) and restores a producer state, a block ledger
//! and an offset store without tripping their assertions.
//!
//! The first byte picks a mode: "raw" passes the rest as is (almost all of it dies at the magic
//! or the checksum); "sealed" writes the magic, the version and a correct checksum around it,
//! so the fuzzer explores the counts and offsets behind them.

#![no_main]

use engine::groups::OffsetStore;
use engine::producer_ids::ProducerIdLedger;
use engine::producer_snapshot::{ProducerSnapshot, VERSION};
use engine::producers::{ProducerLimits, ProducerStates};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let bytes = if mode % 2 == 0 {
        rest.to_vec()
    } else {
        sealed(rest)
    };
    let Ok(snapshot) = ProducerSnapshot::decode(&bytes) else {
        return;
    };
    let encoded = snapshot.encode().expect("a decoded snapshot is within the bounds");
    match &snapshot.groups {
        Some(_) => assert_eq!(encoded, bytes),
        None => {
            let mut current = snapshot.clone();
            current.groups = Some(Vec::new());
            assert_eq!(ProducerSnapshot::decode(&encoded), Ok(current));
        }
    }
    let entries = snapshot.groups.clone().unwrap_or_default();
    let store = OffsetStore::restored(snapshot.offset, entries.clone());
    assert_eq!(store.entries().count(), entries.len());
    assert_eq!(store.committed_to(), snapshot.offset);
    let states = ProducerStates::restored(
        ProducerLimits::default(),
        snapshot.offset,
        snapshot.producers.clone(),
    );
    assert_eq!(states.len(), snapshot.producers.len());
    let ledger = ProducerIdLedger::restored(1, 7, snapshot.blocks.clone());
    assert_eq!(ledger.committed_blocks(), snapshot.blocks);
});

/// `body` behind the magic and the version, followed by its CRC-32C.
fn sealed(body: &[u8]) -> Vec<u8> {
    let mut bytes = b"RRPS".to_vec();
    bytes.extend_from_slice(&VERSION.to_be_bytes());
    bytes.extend_from_slice(body);
    let crc = crc32c::crc32c(&bytes);
    bytes.extend_from_slice(&crc.to_be_bytes());
    bytes
}
