//! The producer-state snapshot file (IO): `<dir>/producer-state.snapshot`, whose bytes
//! `crate::producer_snapshot` defines (docs/storage.md, "The producer-state snapshot").
//!
//! A write replaces the file atomically (`crate::os::file::replace_atomically`, as the
//! recovery checkpoint is): `producer-state.snapshot.tmp`, fsync, rename, fsync of the
//! directory; a crash leaves the old file or the new one. The file is an
//! optimisation: a node without it (or with one it cannot use) reads its whole log at start, as
//! before, so a failed write is reported and the node carries on.

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use crate::os::file::{remove_if_present, replace_atomically};
use crate::producer_snapshot::MAX_BYTES;

/// The file's name inside the log directory.
pub const FILE_NAME: &str = "producer-state.snapshot";
/// The temporary file a write goes through before the rename.
pub const TEMP_FILE_NAME: &str = "producer-state.snapshot.tmp";

/// The snapshot file of one log directory.
#[derive(Clone, Debug)]
pub struct ProducerSnapshotStore {
    dir: PathBuf,
}

impl ProducerSnapshotStore {
    pub fn new(dir: &Path) -> Self {
        Self {
            dir: dir.to_path_buf(),
        }
    }

    pub fn path(&self) -> PathBuf {
        self.dir.join(FILE_NAME)
    }

    /// The file's bytes, None when there is none. A file longer than any snapshot is an error
    /// (nothing past [`MAX_BYTES`] + 1 is read).
    pub fn read(&self) -> io::Result<Option<Vec<u8>>> {
        let file = match File::open(self.path()) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let mut bytes = Vec::new();
        file.take(MAX_BYTES as u64 + 1).read_to_end(&mut bytes)?;
        Ok(Some(bytes))
    }

    /// Replaces the file with `bytes`, durably.
    pub fn write(&self, bytes: &[u8]) -> io::Result<()> {
        replace_atomically(&self.dir, TEMP_FILE_NAME, FILE_NAME, bytes)
    }

    /// Removes the file and any temporary one left by a crash.
    pub fn remove(&self) -> io::Result<()> {
        remove_if_present(&self.dir.join(TEMP_FILE_NAME))?;
        remove_if_present(&self.path())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_replaces_the_file_and_a_remove_clears_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = ProducerSnapshotStore::new(dir.path());
        assert_eq!(store.read().unwrap(), None);
        store.write(b"first").unwrap();
        store.write(b"second").unwrap();
        assert_eq!(store.read().unwrap().as_deref(), Some(&b"second"[..]));
        assert!(!dir.path().join(TEMP_FILE_NAME).exists());
        store.remove().unwrap();
        assert_eq!(store.read().unwrap(), None);
    }

    #[test]
    fn a_longer_file_than_any_snapshot_is_read_only_past_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let store = ProducerSnapshotStore::new(dir.path());
        let file = File::create(store.path()).unwrap();
        file.set_len(MAX_BYTES as u64 + 4096).unwrap();
        assert_eq!(store.read().unwrap().unwrap().len(), MAX_BYTES + 1);
    }
}
