//! The running node: configuration, the directory lock, shutdown signals and the raft thread's
//! event loop ([`runtime::Node`]).

use std::os::fd::{FromRawFd, OwnedFd};

mod api_table;
mod brokers;
mod close_log;
pub mod config;
pub mod counters;
pub mod lock;
pub mod metrics;
mod resolver;
pub mod runtime;
mod sasl_worker;
mod session;
pub mod signals;
pub mod startup_checks;
mod stepping;

pub use config::{ConfigError, LogFormat, NodeConfig, VoterAddress};
pub use runtime::{serve, Node, NodeError};

/// A non-blocking eventfd: how a signal handler (signals.rs) or another thread (the SASL
/// worker) wakes the raft thread's ring, which watches it.
fn eventfd() -> std::io::Result<OwnedFd> {
    // SAFETY: plain syscall.
    let raw = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if raw < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}
