//! The `recovery-checkpoint` file: the leader-epoch cache up to a recovery point, replaced
//! atomically, so that opening the log scans only from that point to the end.

use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::base::{Epoch, Offset};
use crate::os::file::replace_atomically;

pub const CHECKPOINT_FILE: &str = "recovery-checkpoint";
const CHECKPOINT_TMP: &str = "recovery-checkpoint.tmp";
const VERSION: u32 = 1;

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

    /// Reads the checkpoint; Ok(None) when there is none. A file that does not parse is an error
    /// the caller may answer with a full scan (the checkpoint is derived data).
    pub fn load(dir: &Path) -> std::io::Result<Option<Result<Checkpoint, String>>> {
        let text = match fs::read_to_string(Self::path(dir)) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let parsed = serde_json::from_str::<Checkpoint>(text.trim())
            .map_err(|e| e.to_string())
            .and_then(|c| {
                if c.version == VERSION {
                    Ok(c)
                } else {
                    Err(format!("unknown checkpoint version {}", c.version))
                }
            });
        Ok(Some(parsed))
    }

    /// Atomic replace ([`replace_atomically`]).
    pub fn store(&self, dir: &Path) -> std::io::Result<()> {
        let mut text = serde_json::to_string(self).map_err(std::io::Error::other)?;
        text.push('\n');
        replace_atomically(dir, CHECKPOINT_TMP, CHECKPOINT_FILE, text.as_bytes())
    }
}
