//! The log directory's exclusive lock: two processes on one directory would both append.

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// Name of the lock file inside the log directory.
pub const LOCK_FILE: &str = "lock";

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("cannot open the lock file {path}: {source}")]
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "the log directory {dir} is in use by another process (flock on {dir}/lock failed); \
         stop the other ringraft process first, or point log.dirs elsewhere"
    )]
    Busy { dir: PathBuf },
    #[error("flock on {path}: {source}")]
    Flock {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Held for the node's life; the kernel drops the flock when the process exits, even on SIGKILL.
#[derive(Debug)]
pub struct DirLock {
    _file: File,
}

impl DirLock {
    pub fn acquire(dir: &Path) -> Result<DirLock, LockError> {
        let path = dir.join(LOCK_FILE);
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|source| LockError::Open {
                path: path.clone(),
                source,
            })?;
        // SAFETY: plain syscall on a descriptor we own.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            let source = std::io::Error::last_os_error();
            if source.raw_os_error() == Some(libc::EWOULDBLOCK) {
                return Err(LockError::Busy {
                    dir: dir.to_path_buf(),
                });
            }
            return Err(LockError::Flock { path, source });
        }
        Ok(DirLock { _file: file })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_lock_on_the_same_directory_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let first = DirLock::acquire(dir.path()).unwrap();
        assert!(matches!(
            DirLock::acquire(dir.path()),
            Err(LockError::Busy { .. })
        ));
        drop(first);
        DirLock::acquire(dir.path()).unwrap();
    }
}
