//! SIGTERM and SIGINT reach the raft thread's ring through an eventfd.
//!
//! The handler only writes 8 bytes to the eventfd (write(2) is async-signal-safe); the loop
//! watches the eventfd like any other and starts the graceful shutdown.

use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicI32, Ordering};

static SIGNAL_EVENTFD: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_signal(_signal: libc::c_int) {
    let fd = SIGNAL_EVENTFD.load(Ordering::Relaxed);
    if fd >= 0 {
        let one: u64 = 1;
        // SAFETY: write(2) of a local u64 to an eventfd; async-signal-safe.
        unsafe { libc::write(fd, (&one as *const u64).cast(), 8) };
    }
}

/// The eventfd that SIGTERM and SIGINT write to. One per process.
pub struct ShutdownSignals {
    fd: OwnedFd,
}

impl ShutdownSignals {
    pub fn install() -> std::io::Result<ShutdownSignals> {
        // SAFETY: plain syscall.
        let raw = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if raw < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // One node per process: a second install is an error, not a silent steal.
        if SIGNAL_EVENTFD
            .compare_exchange(-1, raw, Ordering::SeqCst, Ordering::SeqCst)
            .is_err()
        {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "shutdown signals are already routed to another node in this process",
            ));
        }
        for signal in [libc::SIGTERM, libc::SIGINT] {
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
        Ok(ShutdownSignals { fd })
    }

    pub fn eventfd(&self) -> RawFd {
        use std::os::fd::AsRawFd;
        self.fd.as_raw_fd()
    }
}

impl Drop for ShutdownSignals {
    fn drop(&mut self) {
        // Before the descriptor closes, so a late signal cannot write to a reused number.
        SIGNAL_EVENTFD.store(-1, Ordering::SeqCst);
    }
}
