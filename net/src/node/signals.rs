//! SIGTERM and SIGINT reach the raft thread's ring through an eventfd, and SIGHUP through
//! another.
//!
//! The handler only writes 8 bytes to the eventfd (write(2) is async-signal-safe); the loop
//! watches the eventfds like any other and starts the graceful shutdown, or reloads the
//! certificates, credentials and ACLs (docs/security.md, "Reloading").

use std::os::fd::{OwnedFd, RawFd};
use std::sync::atomic::{AtomicI32, Ordering};

use super::eventfd;

static SIGNAL_EVENTFD: AtomicI32 = AtomicI32::new(-1);
static RELOAD_EVENTFD: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_signal(signal: libc::c_int) {
    let target = if signal == libc::SIGHUP {
        &RELOAD_EVENTFD
    } else {
        &SIGNAL_EVENTFD
    };
    let fd = target.load(Ordering::Relaxed);
    if fd >= 0 {
        let one: u64 = 1;
        // SAFETY: write(2) of a local u64 to an eventfd; async-signal-safe.
        unsafe { libc::write(fd, (&one as *const u64).cast(), 8) };
    }
}

/// The eventfds that SIGTERM and SIGINT (shutdown) and SIGHUP (reload) write to. One per
/// process.
pub struct ShutdownSignals {
    fd: OwnedFd,
    reload: OwnedFd,
}

impl ShutdownSignals {
    pub fn install() -> std::io::Result<ShutdownSignals> {
        use std::os::fd::AsRawFd;
        let fd = eventfd()?;
        let reload = eventfd()?;
        // One node per process: a second install is an error, not a silent steal.
        if SIGNAL_EVENTFD
            .compare_exchange(-1, fd.as_raw_fd(), Ordering::SeqCst, Ordering::SeqCst)
            .is_err()
        {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "shutdown signals are already routed to another node in this process",
            ));
        }
        RELOAD_EVENTFD.store(reload.as_raw_fd(), Ordering::SeqCst);
        for signal in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
            // SAFETY: installing a handler that only calls write(2).
            unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = on_signal as *const () as usize;
                action.sa_flags = libc::SA_RESTART;
                libc::sigemptyset(&mut action.sa_mask);
                if libc::sigaction(signal, &action, std::ptr::null_mut()) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
        }
        Ok(ShutdownSignals { fd, reload })
    }

    /// Written on SIGTERM and SIGINT.
    pub fn eventfd(&self) -> RawFd {
        use std::os::fd::AsRawFd;
        self.fd.as_raw_fd()
    }

    /// Written on SIGHUP.
    pub fn reload_eventfd(&self) -> RawFd {
        use std::os::fd::AsRawFd;
        self.reload.as_raw_fd()
    }
}

impl Drop for ShutdownSignals {
    fn drop(&mut self) {
        // Before the descriptors close, so a late signal cannot write to a reused number.
        SIGNAL_EVENTFD.store(-1, Ordering::SeqCst);
        RELOAD_EVENTFD.store(-1, Ordering::SeqCst);
    }
}
