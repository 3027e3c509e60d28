//! Stopping the process when continuing could present data as durable that is not.
//!
//! The message goes to stderr on a best-effort basis: the failure that stops the node is often a
//! full disk, and stderr is often a file on that disk. `eprintln!` panics when the write fails,
//! and a panic in the log thread would leave the raft thread running with no writer (a node
//! that hangs instead of stopping), so the write's error is ignored and the exit always happens.

use std::io::Write;

/// Exit codes of the fail-stop paths (documented in docs/operations.md).
pub const EXIT_CORE: i32 = 70;
pub const EXIT_STORAGE: i32 = 74;
pub const EXIT_QUORUM_STATE: i32 = 75;
/// A panic in any thread of a node (a bug): the whole process stops.
pub const EXIT_PANIC: i32 = 101;

/// Writes `ringraft: fatal: {message}` to stderr if it can, then exits with `code`.
pub fn fail_stop(code: i32, message: std::fmt::Arguments<'_>) -> ! {
    let mut stderr = std::io::stderr().lock();
    let _ = writeln!(stderr, "ringraft: fatal: {message}");
    let _ = stderr.flush();
    std::process::exit(code)
}

/// Makes a panic in any thread stop the whole process (after the default hook has reported
/// it, which itself ignores write errors). Without it, a thread that panics leaves the others
/// running: the raft thread would wait forever for a log thread that is gone.
pub fn exit_on_any_panic() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        report(info);
        std::process::exit(EXIT_PANIC);
    }));
}
