//! Thin wrappers over the file syscalls the log needs (O_DIRECT opens, fallocate, syncs, pinning).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

/// Opens `path` for O_DIRECT reads and writes, creating it when `create` is set.
pub fn open_direct(path: &Path, create: bool) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(create)
        .custom_flags(libc::O_DIRECT | libc::O_CLOEXEC)
        .open(path)
}

/// Allocates `[offset, offset + len)` so later writes need no block allocation (mode 0: the file
/// grows to cover the range; the new blocks read as zeros, as unwritten extents).
pub fn fallocate(file: &File, offset: u64, len: u64) -> io::Result<()> {
    // SAFETY: plain syscall on a valid fd.
    let rc = unsafe { libc::fallocate(file.as_raw_fd(), 0, offset as i64, len as i64) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Bytes an unprivileged writer may still allocate on the filesystem holding `path`
/// (statvfs(2): available blocks times the fragment size).
pub fn free_bytes(path: &Path) -> io::Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in the path"))?;
    // SAFETY: statvfs is plain data; zeroed is a valid value to be overwritten.
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a valid NUL-terminated path and a valid out pointer.
    if unsafe { libc::statvfs(c_path.as_ptr(), &mut stat) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // Both are 64-bit on the 64-bit Linux targets the node runs on.
    let (available, fragment): (u64, u64) = (stat.f_bavail, stat.f_frsize);
    Ok(available.saturating_mul(fragment))
}

/// True for the errors that mean "no room" (ENOSPC, EDQUOT): an allocation the filesystem
/// refused, not a failed write whose data's state is unknown.
pub fn is_no_space(error: &io::Error) -> bool {
    matches!(error.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT))
}

/// fdatasync(2).
pub fn fdatasync(file: &File) -> io::Result<()> {
    file.sync_data()
}

/// Removes `path`; a file already gone is fine.
pub fn remove_if_present(path: &Path) -> io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Makes a directory's entries (created, renamed, removed files) durable.
pub fn fsync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Replaces `dir/name` with `bytes` atomically and durably: writes `dir/temp_name`, fsyncs it,
/// renames it over `dir/name`, fsyncs the directory. A crash leaves the old content or the new
/// one; a failure removes the temporary file (best effort).
pub fn replace_atomically(dir: &Path, temp_name: &str, name: &str, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    let temp = dir.join(temp_name);
    let written = (|| {
        let mut file = File::create(&temp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&temp, dir.join(name))?;
        fsync_dir(dir)
    })();
    if written.is_err() {
        let _ = remove_if_present(&temp);
    }
    written
}

/// Writes all of `buf` at `offset` (pwrite(2) until done). For O_DIRECT fds, `buf`, its length and
/// `offset` must be block-aligned.
pub fn write_all_at(file: &File, buf: &[u8], offset: u64) -> io::Result<()> {
    file.write_all_at(buf, offset)
}

/// The first position at or after `offset` that holds data (lseek(2) SEEK_DATA): None when only
/// holes follow. Filesystems report unwritten (fallocated) extents as holes, so a search of a
/// preallocated segment skips its never-written space. Where SEEK_DATA is not supported, every
/// position counts as data (`offset` itself).
pub fn seek_data(file: &File, offset: u64) -> io::Result<Option<u64>> {
    // SAFETY: plain syscall on a valid fd; the fd's own position is not used by the log (every
    // read and write is positioned).
    let at = unsafe { libc::lseek(file.as_raw_fd(), offset as libc::off_t, libc::SEEK_DATA) };
    if at >= 0 {
        return Ok(Some(at as u64));
    }
    let error = io::Error::last_os_error();
    match error.raw_os_error() {
        Some(libc::ENXIO) => Ok(None),
        Some(libc::EINVAL) => Ok(Some(offset)),
        _ => Err(error),
    }
}

/// Reads exactly `buf.len()` bytes at `offset`, or fewer at end of file. Returns the count read.
pub fn read_at_most(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// Why a thread could not be pinned.
#[derive(Debug, thiserror::Error)]
pub enum PinError {
    #[error(
        "cpu {cpu} is not in this process's allowed CPU set {allowed:?} (see taskset/cgroups)"
    )]
    NotAllowed { cpu: usize, allowed: Vec<usize> },
    #[error("sched_getaffinity/sched_setaffinity failed: {0}")]
    Syscall(io::Error),
}

/// The CPUs this thread may run on (sched_getaffinity).
pub fn allowed_cpus() -> Result<Vec<usize>, PinError> {
    // SAFETY: cpu_set_t is plain data; zeroed is its empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer and size for the calling thread (pid 0).
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Err(PinError::Syscall(io::Error::last_os_error()));
    }
    let max = 8 * std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: CPU_ISSET reads the set within its bounds (cpu < max).
    Ok((0..max)
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect())
}

/// Pins the calling thread to `cpu`, after checking that `cpu` is allowed.
pub fn pin_current_thread(cpu: usize) -> Result<(), PinError> {
    let allowed = allowed_cpus()?;
    if !allowed.contains(&cpu) {
        return Err(PinError::NotAllowed { cpu, allowed });
    }
    // SAFETY: as above.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: cpu is within the set (it was reported by sched_getaffinity).
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: valid pointer and size for the calling thread.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc != 0 {
        return Err(PinError::Syscall(io::Error::last_os_error()));
    }
    Ok(())
}

/// The RLIMIT_MEMLOCK soft limit in bytes (None when unlimited).
pub fn memlock_limit() -> Option<u64> {
    // SAFETY: rlimit is plain data.
    let mut limit: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut limit) };
    if rc != 0 || limit.rlim_cur == libc::RLIM_INFINITY {
        return None;
    }
    Some(limit.rlim_cur)
}
