use std::fmt;
use std::io;
use std::net::SocketAddr;

use thiserror::Error;

use crate::wire::FrameError;

use super::ConnId;

#[derive(Debug, Error)]
pub enum TransportError {
    /// io_uring_setup refused by the kernel or a seccomp filter (ENOSYS, EPERM).
    #[error(
        "io_uring is unavailable ({source}): allow it with `sysctl -w kernel.io_uring_disabled=0` \
         (2 disables it for everyone, 1 for unprivileged users outside the io_uring_group), and in \
         a container use a seccomp profile that permits io_uring_setup, io_uring_enter and \
         io_uring_register (e.g. `--security-opt seccomp=unconfined` or a profile listing them)"
    )]
    IoUringUnavailable { source: io::Error },
    #[error("cannot set up an io_uring with {entries} entries: {source}")]
    RingSetup { entries: u32, source: io::Error },
    #[error("io_uring_enter failed: {source}")]
    Enter { source: io::Error },
    #[error("{op} for {addr}: {source}")]
    Socket {
        op: &'static str,
        addr: SocketAddr,
        source: io::Error,
    },
    #[error("eventfd {fd}: {reason}")]
    BadEventFd { fd: i32, reason: &'static str },
    #[error("no open connection {0:?}")]
    UnknownConnection(ConnId),
    #[error("no listener {0}")]
    UnknownListener(u64),
    #[error("connection {conn:?} is closing; no more sends")]
    ConnectionClosing { conn: ConnId },
    #[error("a send chain needs at least one non-empty piece")]
    EmptySend,
    #[error("cannot start a TLS session: {0}")]
    TlsSetup(rustls::Error),
}

/// An errno from a completion, printable.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Errno(pub i32);

impl Errno {
    pub fn kind(self) -> io::ErrorKind {
        io::Error::from_raw_os_error(self.0).kind()
    }
}

impl fmt::Debug for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Errno({}: {})",
            self.0,
            io::Error::from_raw_os_error(self.0)
        )
    }
}

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", io::Error::from_raw_os_error(self.0))
    }
}

/// Why a connection went away.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum CloseReason {
    #[error("closed by the peer")]
    PeerClosed,
    #[error("closed locally")]
    Local,
    #[error("unparsable frame: {0}")]
    Frame(FrameError),
    #[error("receive failed: {0}")]
    Recv(Errno),
    #[error("send failed: {0}")]
    Send(Errno),
    #[error("the loop's budget of {limit} buffered receive bytes was exceeded")]
    BufferLimit { limit: usize },
    /// The TLS handshake had not finished within `Config::tls_handshake_timeout`.
    #[error("the TLS handshake did not finish in time")]
    TlsHandshakeTimeout,
    /// The TLS handshake or a record failed (bad certificate, garbage, a plaintext peer...);
    /// rustls's alert was sent first when it could be.
    #[error("TLS: {0}")]
    Tls(String),
}

/// Why an outbound connection never opened.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum ConnectError {
    #[error("connect timed out")]
    TimedOut,
    #[error("connect failed: {0}")]
    Failed(Errno),
    /// The TCP connection opened but the TLS handshake did not finish in time.
    #[error("the TLS handshake did not finish in time")]
    TlsHandshakeTimeout,
    /// The TCP connection opened but the TLS handshake failed (or the peer closed during it).
    #[error("TLS handshake failed: {0}")]
    Tls(String),
}
