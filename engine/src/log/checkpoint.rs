//! The `recovery-checkpoint` file: the leader-epoch cache up to a recovery point, replaced
//! atomically, so that opening the log scans only from that point to the end.
//!
//! One JSON line sealed with a CRC-32C (`base::sealed_line`; docs/storage.md, "The leader-epoch
//! cache and the recovery checkpoint"). Its epochs cannot be checked against the segments the
//! way its position can, so a changed byte must never be trusted: a checkpoint whose checksum
//! does not match, or one of version 1 (written without a checksum by an earlier build), is
//! refused and the open scans the whole log instead.

use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::base::sealed_line;
use crate::base::{Epoch, Offset};
use crate::os::file::replace_atomically;

pub const CHECKPOINT_FILE: &str = "recovery-checkpoint";
const CHECKPOINT_TMP: &str = "recovery-checkpoint.tmp";
/// Version 2 seals the line with a CRC-32C; version 1 had none and is no longer trusted.
const VERSION: u32 = 2;

/// Everything below `offset` is durable and valid: it lies in the segment `segment_base` before
/// byte `position`, and `epochs` are the cache entries that start below `offset` (and, after
/// retention moved the log start to `offset`, the one that starts there: see
/// [`super::Log::delete_segments_before`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    pub version: u32,
    pub offset: Offset,
    pub segment_base: Offset,
    pub position: u64,
    pub epochs: Vec<(Epoch, Offset)>,
}

impl Checkpoint {
    pub fn new(
        offset: Offset,
        segment_base: Offset,
        position: u64,
        epochs: Vec<(Epoch, Offset)>,
    ) -> Self {
        Self {
            version: VERSION,
            offset,
            segment_base,
            position,
            epochs,
        }
    }

    pub fn path(dir: &Path) -> PathBuf {
        dir.join(CHECKPOINT_FILE)
    }

    /// Reads the checkpoint; Ok(None) when there is none. A file that is damaged (checksum,
    /// truncation), does not parse, or is of another version is an error the caller answers
    /// with a full scan (the checkpoint is derived data).
    pub fn load(dir: &Path) -> std::io::Result<Option<Result<Checkpoint, String>>> {
        let bytes = match fs::read(Self::path(dir)) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        Ok(Some(Self::decode(&bytes)))
    }

    /// Checks and parses a checkpoint file's bytes (pure).
    pub fn decode(bytes: &[u8]) -> Result<Checkpoint, String> {
        let object = sealed_line::unseal(bytes).map_err(|fault| {
            match serde_json::from_slice::<Checkpoint>(bytes) {
                Ok(c) if c.version == 1 => {
                    "version 1, written without a checksum by an earlier build".to_string()
                }
                _ => format!("damaged: {fault}"),
            }
        })?;
        let checkpoint =
            serde_json::from_slice::<Checkpoint>(&object).map_err(|e| format!("damaged: {e}"))?;
        if checkpoint.version != VERSION {
            return Err(format!("unknown checkpoint version {}", checkpoint.version));
        }
        Ok(checkpoint)
    }

    /// The file's bytes: the JSON object, sealed.
    pub fn encode(&self) -> Vec<u8> {
        let object = serde_json::to_vec(self).expect("plain data serializes");
        sealed_line::seal(&object)
    }

    /// Atomic replace ([`replace_atomically`]).
    pub fn store(&self, dir: &Path) -> std::io::Result<()> {
        replace_atomically(dir, CHECKPOINT_TMP, CHECKPOINT_FILE, &self.encode())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checkpoint() -> Checkpoint {
        Checkpoint::new(1200, 1000, 4096, vec![(1, 0), (3, 700)])
    }

    #[test]
    fn the_line_has_the_documented_layout_and_reads_back() {
        let bytes = checkpoint().encode();
        let object = "{\"version\":2,\"offset\":1200,\"segment_base\":1000,\"position\":4096,\
                      \"epochs\":[[1,0],[3,700]]";
        let crc = crc32c::crc32c(object.as_bytes());
        assert_eq!(
            String::from_utf8(bytes.clone()).unwrap(),
            format!("{object},\"crc32c\":\"{crc:08x}\"}}\n")
        );
        assert_eq!(Checkpoint::decode(&bytes), Ok(checkpoint()));
    }

    /// Any flipped bit is refused, in particular one that leaves valid JSON with another epoch
    /// or offset (which the segments could not contradict).
    #[test]
    fn every_flipped_bit_and_every_truncation_is_refused() {
        let bytes = checkpoint().encode();
        for at in 0..bytes.len() {
            for bit in 0..8 {
                let mut bad = bytes.clone();
                bad[at] ^= 1 << bit;
                assert!(Checkpoint::decode(&bad).is_err(), "byte {at} bit {bit}");
            }
        }
        for len in 0..bytes.len() {
            assert!(Checkpoint::decode(&bytes[..len]).is_err(), "len {len}");
        }
        let text = String::from_utf8(bytes).unwrap();
        let other_epoch = text.replace("[3,700]", "[2,700]");
        let error = Checkpoint::decode(other_epoch.as_bytes()).unwrap_err();
        assert!(error.contains("checksum mismatch"), "{error}");
    }

    /// An earlier build's checkpoint had no checksum: refused (one full scan after the
    /// upgrade), with a reason that says so.
    #[test]
    fn a_version_1_checkpoint_is_refused_as_unchecked() {
        let old = "{\"version\":1,\"offset\":1200,\"segment_base\":1000,\"position\":4096,\
                   \"epochs\":[[1,0],[3,700]]}\n";
        let error = Checkpoint::decode(old.as_bytes()).unwrap_err();
        assert!(error.contains("without a checksum"), "{error}");
        assert!(Checkpoint::decode(b"{not json")
            .unwrap_err()
            .contains("damaged"));
    }
}
