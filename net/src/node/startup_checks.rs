//! Start-up checks (docs/operations.md, "Start-up errors"): what the host must provide, checked
//! before the node opens anything, so that a misconfigured host fails with one line naming the
//! cause and the remedy instead of an errno deep inside the log writer.

use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use engine::log::LogConfig;

use super::NodeConfig;

/// The probe's block: the log writes O_DIRECT in 4 KiB-aligned blocks.
const PROBE_BLOCK: usize = 4096;
const PROBE_FILE: &str = ".o_direct-probe";
/// The log's zero-fill buffer, registered with the writer's ring next to the two staging buffers.
const ZERO_BUFFER_BYTES: u64 = 1 << 20;

const TMPFS_MAGIC: i64 = 0x0102_1994;
const RAMFS_MAGIC: i64 = 0x8584_58f6;
const OVERLAYFS_MAGIC: i64 = 0x794c_7630;
const EXT4_MAGIC: i64 = 0xef53;
const XFS_MAGIC: i64 = 0x5846_5342;

#[derive(Debug, thiserror::Error)]
pub enum StartupCheckError {
    #[error(
        "the log directory {dir} ({filesystem}) does not support O_DIRECT writes: put log.dirs on \
         a local ext4 or xfs filesystem (not tmpfs, ramfs, overlay or a network filesystem)"
    )]
    NoDirectIo { dir: PathBuf, filesystem: String },
    #[error("probing O_DIRECT in the log directory {dir}: {source}")]
    DirectIoProbe { dir: PathBuf, source: io::Error },
    #[error(
        "{key}={cpu} is outside this process's allowed CPU set {allowed}: pick one of those CPUs, \
         or widen the set (`taskset -p $$`, the container's or cgroup's cpuset)"
    )]
    CpuNotAllowed {
        key: &'static str,
        cpu: usize,
        allowed: String,
    },
    #[error("reading the allowed CPU set (sched_getaffinity): {0}")]
    Affinity(io::Error),
    #[error(
        "io_uring is disabled by the sysctl kernel.io_uring_disabled={value} ({source}): {remedy}"
    )]
    IoUringDisabled {
        value: u8,
        source: io::Error,
        remedy: &'static str,
    },
    #[error(transparent)]
    IoUring(#[from] crate::transport::TransportError),
}

/// Runs every check; the first failure stops the start-up. The results are logged at INFO
/// with their figures, warnings (memlock) at WARN, and returned for the metrics.
pub fn run(
    config: &NodeConfig,
    log_config: &LogConfig,
) -> Result<super::metrics::StartupReport, StartupCheckError> {
    check_io_uring()?;
    check_cpus(config)?;
    check_direct_io(&config.log_dir)?;
    tracing::info!(
        dir = %config.log_dir.display(),
        filesystem = %filesystem_name(&config.log_dir),
        "start-up check: O_DIRECT writes work in the log directory"
    );
    let limit = engine::os::file::memlock_limit();
    let needed = registered_bytes(log_config);
    match memlock_warning(limit, needed) {
        Some(warning) => tracing::warn!("{warning}"),
        None => tracing::info!(
            memlock_limit_kib = limit.map(|l| l / 1024),
            needed_kib = needed / 1024,
            "start-up check: RLIMIT_MEMLOCK {} covers the log writer's registered buffers",
            limit.map_or("unlimited".to_string(), |l| format!("{} KiB", l / 1024)),
        ),
    }
    Ok(super::metrics::StartupReport {
        fdatasync_probe: None,
        dsync_probe: None,
        sync_mode: None,
        memlock_limit: limit,
        memlock_needed: needed,
        o_direct: true,
        registered_buffers: false,
    })
}

const IO_URING_DISABLED_SYSCTL: &str = "/proc/sys/kernel/io_uring_disabled";

/// A ring of two entries: if the kernel or a seccomp filter refuses io_uring, say so first.
fn check_io_uring() -> Result<(), StartupCheckError> {
    match io_uring::IoUring::new(2) {
        Ok(_) => Ok(()),
        Err(source) => {
            let sysctl = std::fs::read_to_string(IO_URING_DISABLED_SYSCTL)
                .ok()
                .and_then(|v| v.trim().parse::<u8>().ok());
            Err(io_uring_refusal(source, sysctl))
        }
    }
}

/// Why io_uring_setup failed: the sysctl when it is set (1 or 2; absent before Linux 6.6),
/// else most likely a seccomp filter (a container runtime's default profile), whose message
/// names both remedies.
pub fn io_uring_refusal(source: io::Error, io_uring_disabled: Option<u8>) -> StartupCheckError {
    match io_uring_disabled {
        Some(value @ 2) => StartupCheckError::IoUringDisabled {
            value,
            source,
            remedy: "2 disables it for every process; allow it with \
                     `sysctl -w kernel.io_uring_disabled=0`",
        },
        Some(value @ 1) => StartupCheckError::IoUringDisabled {
            value,
            source,
            remedy: "1 allows it only for CAP_SYS_ADMIN and the group in kernel.io_uring_group; \
                     run the node as a member of that group, or allow it for everyone with \
                     `sysctl -w kernel.io_uring_disabled=0`",
        },
        _ => crate::transport::TransportError::IoUringUnavailable { source }.into(),
    }
}

fn check_cpus(config: &NodeConfig) -> Result<(), StartupCheckError> {
    if config.raft_cpu.is_none() && config.log_cpu.is_none() {
        return Ok(());
    }
    let allowed = engine::os::file::allowed_cpus().map_err(|e| match e {
        engine::os::file::PinError::Syscall(source) => StartupCheckError::Affinity(source),
        other => StartupCheckError::Affinity(io::Error::other(other.to_string())),
    })?;
    check_cpu("raft.cpu", config.raft_cpu, &allowed)?;
    check_cpu("log.cpu", config.log_cpu, &allowed)
}

/// `cpu` (set by `key`) must be in `allowed`.
pub fn check_cpu(
    key: &'static str,
    cpu: Option<usize>,
    allowed: &[usize],
) -> Result<(), StartupCheckError> {
    match cpu {
        Some(cpu) if !allowed.contains(&cpu) => Err(StartupCheckError::CpuNotAllowed {
            key,
            cpu,
            allowed: cpu_list(allowed),
        }),
        _ => Ok(()),
    }
}

/// `0-3,6,8-9`, the form of /proc/PID/status's Cpus_allowed_list.
pub fn cpu_list(cpus: &[usize]) -> String {
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    for &cpu in cpus {
        match ranges.last_mut() {
            Some((_, end)) if *end + 1 == cpu => *end = cpu,
            _ => ranges.push((cpu, cpu)),
        }
    }
    if ranges.is_empty() {
        return "{} (empty)".into();
    }
    ranges
        .iter()
        .map(|&(start, end)| {
            if start == end {
                start.to_string()
            } else {
                format!("{start}-{end}")
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Writes one aligned block with O_DIRECT in `dir` (created by the caller), then removes it.
pub fn check_direct_io(dir: &Path) -> Result<(), StartupCheckError> {
    let path = dir.join(PROBE_FILE);
    let result = write_direct_block(&path);
    let _ = std::fs::remove_file(&path);
    match result {
        Ok(()) => Ok(()),
        Err(error) if error.raw_os_error() == Some(libc::EINVAL) => {
            Err(StartupCheckError::NoDirectIo {
                dir: dir.to_path_buf(),
                filesystem: filesystem_name(dir),
            })
        }
        Err(source) => Err(StartupCheckError::DirectIoProbe {
            dir: dir.to_path_buf(),
            source,
        }),
    }
}

fn write_direct_block(path: &Path) -> io::Result<()> {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)?;
    let block = AlignedBlock::zeroed();
    file.write_all(block.as_slice())
}

/// One zeroed, 4 KiB-aligned block (O_DIRECT needs an aligned buffer).
struct AlignedBlock {
    ptr: *mut u8,
}

impl AlignedBlock {
    fn layout() -> std::alloc::Layout {
        std::alloc::Layout::from_size_align(PROBE_BLOCK, PROBE_BLOCK).expect("valid layout")
    }

    fn zeroed() -> Self {
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(Self::layout()) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(Self::layout());
        }
        Self { ptr }
    }

    fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr points at PROBE_BLOCK initialised (zeroed) bytes owned by self.
        unsafe { std::slice::from_raw_parts(self.ptr, PROBE_BLOCK) }
    }
}

impl Drop for AlignedBlock {
    fn drop(&mut self) {
        // SAFETY: allocated in `zeroed` with the same layout.
        unsafe { std::alloc::dealloc(self.ptr, Self::layout()) };
    }
}

/// "tmpfs", "overlay", "ext4" or the statfs magic, for messages.
fn filesystem_name(dir: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c_path) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return "unknown filesystem".into();
    };
    // SAFETY: statfs is plain data.
    let mut stat: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: valid NUL-terminated path and out pointer.
    if unsafe { libc::statfs(c_path.as_ptr(), &mut stat) } != 0 {
        return "unknown filesystem".into();
    }
    #[allow(clippy::unnecessary_cast)] // f_type's width differs between architectures
    match stat.f_type as i64 {
        TMPFS_MAGIC => "tmpfs".into(),
        RAMFS_MAGIC => "ramfs".into(),
        OVERLAYFS_MAGIC => "overlay".into(),
        EXT4_MAGIC => "ext4".into(),
        XFS_MAGIC => "xfs".into(),
        magic => format!("filesystem magic {magic:#x}"),
    }
}

/// Bytes the log writer registers with its ring: both staging buffers and the zero buffer.
pub fn registered_bytes(log_config: &LogConfig) -> u64 {
    2 * log_config.max_group_bytes as u64 + ZERO_BUFFER_BYTES
}

/// A warning if RLIMIT_MEMLOCK (`limit`, None = unlimited) is below `needed`.
pub fn memlock_warning(limit: Option<u64>, needed: u64) -> Option<String> {
    let limit = limit?;
    (limit < needed).then(|| {
        format!(
            "RLIMIT_MEMLOCK is {} KiB but the log writer registers {} KiB of buffers with \
             io_uring: it will fall back to unregistered writes (slower); raise it with \
             `ulimit -l {}` (LimitMEMLOCK= in a systemd unit, --ulimit memlock= in docker) or \
             grant CAP_IPC_LOCK",
            limit / 1024,
            needed / 1024,
            needed.div_ceil(1024)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cpu_outside_the_allowed_set_names_the_key_and_the_set() {
        let error = check_cpu("log.cpu", Some(7), &[0, 1, 2, 5]).unwrap_err();
        let message = error.to_string();
        assert!(message.contains("log.cpu=7"), "{message}");
        assert!(message.contains("0-2,5"), "{message}");
        assert!(check_cpu("raft.cpu", Some(5), &[0, 1, 2, 5]).is_ok());
        assert!(check_cpu("raft.cpu", None, &[0]).is_ok());
    }

    #[test]
    fn the_real_allowed_set_accepts_its_own_cpus_and_refuses_one_beyond() {
        let allowed = engine::os::file::allowed_cpus().unwrap();
        let first = *allowed.first().unwrap();
        let beyond = *allowed.last().unwrap() + 1;
        assert!(check_cpu("raft.cpu", Some(first), &allowed).is_ok());
        assert!(check_cpu("raft.cpu", Some(beyond), &allowed).is_err());
    }

    #[test]
    fn cpu_lists_collapse_runs() {
        assert_eq!(cpu_list(&[0, 1, 2, 3]), "0-3");
        assert_eq!(cpu_list(&[1, 3, 4, 9]), "1,3-4,9");
    }

    #[test]
    fn the_o_direct_probe_passes_on_the_temp_dir_and_leaves_no_file() {
        let dir = tempfile::tempdir().unwrap();
        check_direct_io(dir.path()).unwrap();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn the_o_direct_probe_reports_a_missing_directory_with_its_cause() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing");
        let error = check_direct_io(&missing).unwrap_err();
        assert!(
            matches!(error, StartupCheckError::DirectIoProbe { .. }),
            "{error}"
        );
    }

    /// Set for the copy of this test binary that
    /// [`the_o_direct_probe_refuses_ramfs_naming_the_cause_and_the_remedy`] runs inside a private
    /// mount namespace, where this directory is a ramfs mount.
    const RAMFS_DIR_ENV: &str = "RINGRAFT_TEST_RAMFS_DIR";

    /// ramfs refuses O_DIRECT (EINVAL) where this machine's tmpfs accepts it. The test runs itself
    /// again under `unshare -rm` (user and mount namespaces: no privilege needed, nothing
    /// mounted outside) with a ramfs on a temp dir, and that copy runs the probe there.
    #[test]
    fn the_o_direct_probe_refuses_ramfs_naming_the_cause_and_the_remedy() {
        if let Some(dir) = std::env::var_os(RAMFS_DIR_ENV) {
            let dir = PathBuf::from(dir);
            let error = check_direct_io(&dir).unwrap_err();
            assert!(
                matches!(error, StartupCheckError::NoDirectIo { .. }),
                "{error}"
            );
            let message = error.to_string();
            for needed in [
                "O_DIRECT",
                "(ramfs)",
                "log.dirs",
                "ext4",
                &dir.display().to_string(),
            ] {
                assert!(message.contains(needed), "no `{needed}` in: {message}");
            }
            assert!(!message.contains('\n'), "one line: {message}");
            assert_eq!(
                std::fs::read_dir(&dir).unwrap().count(),
                0,
                "probe file left"
            );
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let test_name = format!(
            "{}::the_o_direct_probe_refuses_ramfs_naming_the_cause_and_the_remedy",
            module_path!().split_once("::").expect("crate::path").1
        );
        let output = std::process::Command::new("unshare")
            .args(["-rm", "sh", "-c"])
            .arg(r#"mount -t ramfs none "$1" && exec "$2" --exact "$3" --nocapture"#)
            .arg("sh")
            .arg(dir.path())
            .arg(std::env::current_exe().unwrap())
            .arg(&test_name)
            .env(RAMFS_DIR_ENV, dir.path())
            .output()
            .unwrap_or_else(|e| {
                panic!("cannot run `unshare` (util-linux), which this test needs: {e}")
            });
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.success() && stdout.contains("1 passed"),
            "the probe inside `unshare -rm` + ramfs failed ({}):\n{stdout}\n{stderr}",
            output.status
        );
    }

    #[test]
    fn an_io_uring_refusal_names_the_sysctl_when_it_is_set_and_seccomp_otherwise() {
        let eperm = || io::Error::from_raw_os_error(libc::EPERM);
        for value in [1u8, 2] {
            let message = io_uring_refusal(eperm(), Some(value)).to_string();
            assert!(
                message.contains(&format!("kernel.io_uring_disabled={value}")),
                "{message}"
            );
            assert!(
                message.contains("sysctl -w kernel.io_uring_disabled=0"),
                "{message}"
            );
        }
        assert!(io_uring_refusal(eperm(), Some(1))
            .to_string()
            .contains("kernel.io_uring_group"));
        for sysctl in [Some(0), None] {
            let message = io_uring_refusal(eperm(), sysctl).to_string();
            assert!(message.contains("seccomp"), "{message}");
        }
    }

    #[test]
    fn a_memlock_limit_below_the_registered_buffers_warns_with_the_remedy() {
        let needed = registered_bytes(&LogConfig::default());
        let warning = memlock_warning(Some(needed - 1), needed).unwrap();
        assert!(warning.contains("ulimit -l"), "{warning}");
        assert!(warning.contains("CAP_IPC_LOCK"), "{warning}");
        assert!(memlock_warning(Some(needed), needed).is_none());
        assert!(memlock_warning(None, needed).is_none());
    }
}
