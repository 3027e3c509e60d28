//! A child process that cannot outlive its guard, nor the thread that started it.

use std::io::Read;
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

/// A child process killed (SIGKILL) and reaped when dropped.
pub struct ProcessGuard {
    pub child: Child,
}

impl ProcessGuard {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn signal(&self, signal: i32) {
        // SAFETY: plain syscall on our own, not yet reaped, child.
        unsafe { libc::kill(self.child.id() as libc::pid_t, signal) };
    }

    /// Its exit status if it has exited (reaped now; later calls give the same status).
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Waits (bounded) for the process to exit; Some(status) if it did.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.exited() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for ProcessGuard {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What `guard`'s process wrote to its piped stderr (read to the end: the process must exit).
pub fn read_stderr(guard: &mut ProcessGuard) -> String {
    let mut out = String::new();
    guard
        .child
        .stderr
        .take()
        .expect("stderr is piped")
        .read_to_string(&mut out)
        .unwrap();
    out
}

/// The child gets SIGKILL when the thread that spawns it ends, even when this process is
/// SIGKILLed.
pub fn kill_with_parent(command: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}
