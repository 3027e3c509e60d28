//! A JSON object on one line, sealed with a CRC-32C of its bytes (docs/storage.md, "Sealed
//! lines"): `{...,"crc32c":"0a1b2c3d"}\n`. The checksum is the last field, eight lowercase hex
//! digits, and covers every byte of the line before its `,"crc32c":` (the exact bytes the
//! writer produced, not a re-serialization). The line stays one JSON object, so `jq` and a
//! reader of the plain fields still read it; whatever changes a byte of it (a flipped bit, a
//! torn or misdirected write) is caught here before any field is trusted.
//!
//! Used by the quorum-state copies and the recovery checkpoint: small files rewritten whole.

use thiserror::Error;

/// What ends a sealed line after the protected bytes: `,"crc32c":"` + 8 hex digits + `"}\n`.
const TAIL_START: &[u8] = b",\"crc32c\":\"";
const TAIL_END: &[u8] = b"\"}\n";
const TAIL_LEN: usize = TAIL_START.len() + 8 + TAIL_END.len();

/// Why a line is not a sealed line whose checksum matches.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum SealFault {
    /// Empty, or no final newline: the write was cut short or the file truncated.
    #[error("truncated ({len} bytes, no final newline)")]
    Truncated { len: usize },
    /// A whole line without a well-formed `"crc32c"` field at its end.
    #[error("no checksum field at the end of the line")]
    NoChecksum,
    #[error("checksum mismatch (stored {stored:08x}, computed {computed:08x})")]
    Mismatch { stored: u32, computed: u32 },
}

/// Seals `object`, the serialized text of one JSON object (`{` ... `}`, at least one field,
/// no newline): the line with the checksum as its last field, newline-terminated.
pub fn seal(object: &[u8]) -> Vec<u8> {
    assert!(
        object.len() > 2 && object.starts_with(b"{") && object.ends_with(b"}"),
        "seal takes a JSON object with fields"
    );
    debug_assert!(!object.contains(&b'\n'));
    let protected = &object[..object.len() - 1];
    let mut line = Vec::with_capacity(protected.len() + TAIL_LEN);
    line.extend_from_slice(protected);
    line.extend_from_slice(TAIL_START);
    line.extend_from_slice(format!("{:08x}", crc32c::crc32c(protected)).as_bytes());
    line.extend_from_slice(TAIL_END);
    line
}

/// The JSON object `line` seals (the checksum field left out), once its checksum matches.
/// Checks bytes only: the caller parses the object.
pub fn unseal(line: &[u8]) -> Result<Vec<u8>, SealFault> {
    if !line.ends_with(b"\n") {
        return Err(SealFault::Truncated { len: line.len() });
    }
    if line.len() < TAIL_LEN + 1 {
        return Err(SealFault::NoChecksum);
    }
    let (protected, tail) = line.split_at(line.len() - TAIL_LEN);
    let digits = &tail[TAIL_START.len()..TAIL_START.len() + 8];
    if !tail.starts_with(TAIL_START)
        || !tail.ends_with(TAIL_END)
        || !digits
            .iter()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    {
        return Err(SealFault::NoChecksum);
    }
    let stored = digits.iter().fold(0u32, |crc, &b| {
        (crc << 4) | (b as char).to_digit(16).unwrap_or(0)
    });
    let computed = crc32c::crc32c(protected);
    if stored != computed {
        return Err(SealFault::Mismatch { stored, computed });
    }
    let mut object = Vec::with_capacity(protected.len() + 1);
    object.extend_from_slice(protected);
    object.push(b'}');
    Ok(object)
}

#[cfg(test)]
mod tests {
    use super::*;

    const OBJECT: &[u8] = b"{\"a\":1,\"b\":\"x\"}";

    #[test]
    fn a_sealed_line_has_the_documented_layout_and_unseals() {
        let line = seal(OBJECT);
        let crc = crc32c::crc32c(b"{\"a\":1,\"b\":\"x\"");
        assert_eq!(
            String::from_utf8(line.clone()).unwrap(),
            format!("{{\"a\":1,\"b\":\"x\",\"crc32c\":\"{crc:08x}\"}}\n")
        );
        assert_eq!(unseal(&line).unwrap(), OBJECT);
        let value: serde_json::Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(value["a"], 1, "still one JSON object");
    }

    /// Every single-bit change anywhere in the line is caught (CRC-32C detects every 1-bit
    /// error), as is every truncation.
    #[test]
    fn every_flipped_bit_and_every_truncation_is_refused() {
        let line = seal(OBJECT);
        for at in 0..line.len() {
            for bit in 0..8 {
                let mut changed = line.clone();
                changed[at] ^= 1 << bit;
                assert!(unseal(&changed).is_err(), "byte {at} bit {bit}");
            }
        }
        for len in 0..line.len() {
            assert!(unseal(&line[..len]).is_err(), "len {len}");
        }
    }

    #[test]
    fn the_faults_name_what_is_wrong() {
        assert_eq!(unseal(b""), Err(SealFault::Truncated { len: 0 }));
        assert_eq!(unseal(b"{\"a\":1}"), Err(SealFault::Truncated { len: 7 }));
        assert_eq!(unseal(b"{\"a\":1}\n"), Err(SealFault::NoChecksum));
        let upper = String::from_utf8(seal(OBJECT)).unwrap().to_uppercase();
        assert_eq!(unseal(upper.as_bytes()), Err(SealFault::NoChecksum));
        let mut line = seal(OBJECT);
        line[1] = b'A';
        assert!(matches!(unseal(&line), Err(SealFault::Mismatch { .. })));
    }
}
