//! Standard output that a closed pipe cannot turn into a panic (docs/operations.md, "Output
//! into a closed pipe").
//!
//! `println!` panics when the write fails, which is what `ringraft quorum --describe | head -1`
//! did once `head` had exited. Every line of a command's output goes through [`line`] instead:
//! the error comes back as an `io::Result`, the command stops where it is (its destructors run:
//! nothing it started is left behind), and `main` exits with [`CLOSED_STATUS`] without a word
//! when the error was a closed pipe. SIGPIPE keeps the disposition the Rust runtime gives it
//! (ignored): a process-wide SIGPIPE default would kill the process on a write to any closed
//! pipe or socket, and skip those destructors.
//!
//! One crate for the `ringraft` and `ringraft-sim` tools and `ringraft-bench`.

use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};

/// The exit status of a command whose standard output was closed under it: 128 + SIGPIPE, what a
/// shell reports for a program killed by SIGPIPE, so `set -o pipefail` sees the output was cut.
pub const CLOSED_STATUS: u8 = 141;

static CLOSED: AtomicBool = AtomicBool::new(false);

/// Writes `args` and a newline to standard output. Once a write found the pipe closed, every
/// later call fails the same way without writing.
pub fn line(args: std::fmt::Arguments) -> io::Result<()> {
    if closed() {
        return Err(io::ErrorKind::BrokenPipe.into());
    }
    let mut stdout = io::stdout().lock();
    let result = stdout
        .write_fmt(args)
        .and_then(|()| stdout.write_all(b"\n"))
        .and_then(|()| stdout.flush());
    if let Err(error) = &result {
        if is_closed_pipe(error) {
            CLOSED.store(true, Ordering::Relaxed);
        }
    }
    result
}

/// True once a write to standard output found the pipe closed.
pub fn closed() -> bool {
    CLOSED.load(Ordering::Relaxed)
}

pub fn is_closed_pipe(error: &io::Error) -> bool {
    error.kind() == io::ErrorKind::BrokenPipe
}

/// A write error worth a message (anything but a closed pipe: a full disk, say).
pub fn describe(error: &io::Error) -> String {
    format!("writing to standard output: {error}")
}

/// `P::parse()`, with clap's `--help` and `--version` output under the same rule: a closed
/// stdout exits [`CLOSED_STATUS`] (clap itself would ignore the error and exit 0). Nothing has
/// been started yet, so exiting here leaves nothing behind.
pub fn parse_args<P: clap::Parser>() -> P {
    match P::try_parse() {
        Ok(parsed) => parsed,
        Err(error) => {
            let printed = error.print();
            if !error.use_stderr() && printed.is_err_and(|e| is_closed_pipe(&e)) {
                std::process::exit(CLOSED_STATUS.into());
            }
            std::process::exit(error.exit_code());
        }
    }
}

/// `println!` through [`line`]: evaluates to `io::Result<()>`.
#[macro_export]
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::line(format_args!($($arg)*))
    };
}
