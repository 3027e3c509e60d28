//! Arbitrary bytes into the quorum-state copy decoder and the decision over two copies
//! (docs/protocol.md, "The quorum-state file"), and into the recovery checkpoint's decoder:
//! errors, never a panic. Whatever a copy decodes to gives an election state; a sealed record
//! decoded twice decides as intact.
//!
//! The first byte picks a mode: "raw" passes the rest as is (almost all of it dies at the
//! newline or the checksum, or is read as an earlier build's unsealed line); "sealed" seals the
//! rest with a correct CRC-32C first, so the fuzzer explores the JSON behind the checksum. The
//! second byte splits the rest into copy A and copy B.

#![no_main]

use engine::base::sealed_line;
use engine::log::Checkpoint;
use engine::quorum_state_store::{decide, decode_copy, Verdict};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let Some((&split, rest)) = rest.split_first() else {
        return;
    };
    let at = usize::from(split).min(rest.len());
    let (a, b) = rest.split_at(at);
    let (a, b) = if mode % 2 == 0 {
        (a.to_vec(), b.to_vec())
    } else {
        (sealed(a), sealed(b))
    };
    let _ = Checkpoint::decode(&a);
    let decoded = decode_copy(&a);
    if let Ok(record) = &decoded {
        let _ = record.election_state();
        let _ = record.directory_id();
        if record.is_sealed() {
            assert_eq!(
                decide(Ok(record.clone()), Ok(record.clone())),
                Verdict::Intact(record.clone())
            );
        }
    }
    let _ = decide(decoded, decode_copy(&b));
});

/// `object`'s bytes sealed as a line, when they look like a JSON object; as they are otherwise.
fn sealed(object: &[u8]) -> Vec<u8> {
    if object.len() > 2
        && object.starts_with(b"{")
        && object.ends_with(b"}")
        && !object.contains(&b'\n')
    {
        sealed_line::seal(object)
    } else {
        object.to_vec()
    }
}
