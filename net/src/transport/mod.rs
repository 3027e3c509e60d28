//! Thread-per-core TCP over io_uring: one [`EventLoop`] per thread, driven by its owner.
//!
//! The loop owns one ring, every socket it opened or accepted, and a slab of in-flight
//! operations keyed by the ring's `user_data`. The owner (the node's raft thread) calls
//! [`EventLoop::poll`] with the time until its next deadline, gets back [`Event`]s (whole frames,
//! accepted and closed connections, fired timers, eventfd wakes), reacts, and queues sends with
//! [`EventLoop::send`]; nothing here spawns a thread or blocks outside `poll`.
//!
//! Listeners and outbound connections may speak TLS ([`EventLoop::listen_tls`],
//! [`EventLoop::connect_tls`]): the loop handshakes, decrypts and encrypts, and the owner still
//! sees whole plaintext frames (docs/security.md, "TLS").
//!
//! Sketch of the raft thread's loop:
//! ```no_run
//! # use net::transport::{Config, Event, EventLoop};
//! # use std::time::Duration;
//! let mut ring = EventLoop::new(Config::default())?;
//! let listener = ring.listen("127.0.0.1:9092".parse().unwrap())?;
//! let mut events = Vec::new();
//! loop {
//!     // next_deadline from the Raft core: wake then even if nothing arrives.
//!     ring.poll(Some(Duration::from_millis(50)), &mut events)?;
//!     for event in events.drain(..) {
//!         match event {
//!             Event::Frame { conn, bytes } => { /* decode, step the core, ring.send(conn, chain)? */ }
//!             Event::Closed { conn, reason } => { /* forget the connection */ }
//!             _ => {}
//!         }
//!     }
//! #   break;
//! }
//! # Ok::<(), net::transport::TransportError>(())
//! ```

mod buf_ring;
mod error;
mod event_loop;
mod slab;
mod socket;
mod tls;

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use bytes::Bytes;

pub use error::{CloseReason, ConnectError, Errno, TransportError};
pub use event_loop::EventLoop;
pub use tls::TlsPeerInfo;
/// The per-connection TLS wrapper the loop uses, public for the fuzz target only.
#[doc(hidden)]
pub use tls::{Fed, TlsFailure, TlsSession};

use crate::wire::frame::DEFAULT_MAX_FRAME_BYTES;

/// A connection (accepted or outbound). Ids are never reused within a loop's life in practice
/// (a generation counter per slot), so a stale id is refused rather than misdirected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConnId(pub(crate) u64);

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ListenerId(pub(crate) u64);

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TimerId(pub(crate) u64);

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WatchId(pub(crate) u64);

#[derive(Debug)]
pub enum Event {
    /// A connection was accepted. On a TLS listener this is at TCP accept, before the
    /// handshake; a handshake that fails or times out is reported as `Closed`.
    Accepted {
        listener: ListenerId,
        conn: ConnId,
        peer: SocketAddr,
    },
    /// An outbound connection is open. For a TLS connection this is after the handshake (the
    /// server's certificate verified); a handshake that fails or times out gives
    /// `ConnectFailed` instead.
    Connected {
        conn: ConnId,
    },
    /// The outbound connection never opened; the id is gone (no `Closed` follows).
    ConnectFailed {
        conn: ConnId,
        error: ConnectError,
    },
    /// One whole frame without its 4-byte size prefix. Accepted connections carry requests
    /// (at least a request prefix, 8 bytes), outbound ones responses (at least 4 bytes). On a
    /// TLS connection frames are decrypted and come only after the handshake, so
    /// [`EventLoop::tls_peer`] answers by the first one.
    Frame {
        conn: ConnId,
        bytes: Bytes,
    },
    /// The connection is gone, its socket closed, its queued sends dropped. Also reported after
    /// a local [`EventLoop::close`] of an open connection.
    Closed {
        conn: ConnId,
        reason: CloseReason,
    },
    TimerFired {
        id: TimerId,
    },
    /// The watched eventfd was written; `count` is the counter value read (and reset).
    EventFd {
        id: WatchId,
        count: u64,
    },
}

/// What to ask of the kernel. The defaults suit a node; tests turn features off to exercise the
/// fallbacks.
#[derive(Clone, Debug)]
pub struct Config {
    /// Submission queue entries (the completion queue gets four times as many).
    pub ring_entries: u32,
    /// Try IORING_SETUP_SINGLE_ISSUER | DEFER_TASKRUN | COOP_TASKRUN first.
    pub try_single_issuer: bool,
    /// Receive through a provided buffer ring with multishot recv; else one recv buffer per
    /// connection and a re-armed single-shot recv.
    pub use_buf_ring: bool,
    /// Multishot accept; else a re-armed single-shot accept.
    pub use_multishot_accept: bool,
    /// Buffers in the provided ring (power of two, at most 32768) and their size.
    pub recv_buffer_count: u16,
    pub recv_buffer_size: u32,
    /// Largest frame accepted from a peer (Kafka's `socket.request.max.bytes`).
    pub max_frame_bytes: usize,
    /// Cap on received bytes not yet handed out as frames, summed over each listener's
    /// connections and, apart, over the connections the loop opened. The connection whose
    /// receive crosses its cap is closed, so a flood of half-sent huge frames cannot exhaust
    /// memory, nor make another listener's connection or an outbound one the one closed.
    pub max_buffered_bytes: usize,
    /// Connections each listener keeps open at once, unless set for one listener
    /// (`EventLoop::set_listener_max_connections`): one more is closed as soon as it is
    /// accepted. Each listener counts only its own, and outbound connections count against
    /// none, so clients that fill a client listener cannot shut the voters out of the
    /// controller listener (docs/architecture.md, "Transport").
    pub max_connections: usize,
    pub listen_backlog: u32,
    pub connect_timeout: Duration,
    /// SO_SNDBUF for every socket, if set (tests use a small one to force partial sends).
    pub send_buffer_bytes: Option<usize>,
    /// A TLS connection whose handshake has not finished this long after its accept (or its
    /// `connect_tls`) is closed: `CloseReason::TlsHandshakeTimeout` or
    /// `ConnectError::TlsHandshakeTimeout`.
    pub tls_handshake_timeout: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            ring_entries: 256,
            try_single_issuer: true,
            use_buf_ring: true,
            use_multishot_accept: true,
            recv_buffer_count: 256,
            recv_buffer_size: 16 * 1024,
            max_frame_bytes: DEFAULT_MAX_FRAME_BYTES,
            max_buffered_bytes: 256 * 1024 * 1024,
            max_connections: 1024,
            listen_backlog: 1024,
            connect_timeout: Duration::from_secs(2),
            send_buffer_bytes: None,
            tls_handshake_timeout: Duration::from_secs(10),
        }
    }
}

/// How many connections one listener keeps open at once from one IP address (Kafka's
/// `max.connections.per.ip` and `max.connections.per.ip.overrides`, counted per listener as
/// `max_connections` is): one more from that address is closed as soon as it is accepted.
/// IPv4-mapped IPv6 addresses count as their IPv4 address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PerIpLimit {
    /// For every address without an override.
    pub default: usize,
    /// Addresses with their own limit (0: none of theirs is kept).
    pub overrides: Vec<(IpAddr, usize)>,
}

impl PerIpLimit {
    /// No limit per address (the listener's `max_connections` still holds).
    pub fn unlimited() -> Self {
        Self {
            default: usize::MAX,
            overrides: Vec::new(),
        }
    }

    /// The limit for connections from `ip`.
    pub fn for_ip(&self, ip: IpAddr) -> usize {
        let ip = ip.to_canonical();
        self.overrides
            .iter()
            .find(|(address, _)| address.to_canonical() == ip)
            .map_or(self.default, |(_, limit)| *limit)
    }
}

/// Which io_uring features the loop ended up with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Features {
    /// SINGLE_ISSUER | DEFER_TASKRUN | COOP_TASKRUN were accepted.
    pub single_issuer_defer_taskrun: bool,
    /// Receives use a provided buffer ring with multishot recv.
    pub buf_ring: bool,
    /// Accepts use multishot accept.
    pub multishot_accept: bool,
}

/// Counters since the loop was created.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub accepted: u64,
    /// Accepted connections closed at once because their listener had its `max_connections`
    /// open.
    pub refused: u64,
    /// Accepted connections closed at once because their listener had as many open from the
    /// same address as its `PerIpLimit` allows (not counted in `refused`).
    pub refused_per_ip: u64,
    pub frames_received: u64,
    pub bytes_received: u64,
    pub bytes_sent: u64,
    /// sendmsg completions (each may carry several queued frames).
    pub sends: u64,
    /// sendmsg completions that sent less than asked and were resubmitted for the rest.
    pub partial_sends: u64,
    /// Encryption buffers allocated for TLS sendmsgs; a sendmsg reuses a finished one's when
    /// one is free.
    pub tls_buffers_allocated: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_gets_its_override_else_the_default_mapped_or_not() {
        let limit = PerIpLimit {
            default: 5,
            overrides: vec![
                ("10.0.0.1".parse().unwrap(), 0),
                ("::ffff:10.0.0.2".parse().unwrap(), 7),
                ("fd00::1".parse().unwrap(), 2),
            ],
        };
        let of = |ip: &str| limit.for_ip(ip.parse().unwrap());
        assert_eq!(of("10.0.0.1"), 0);
        assert_eq!(
            of("::ffff:10.0.0.1"),
            0,
            "an IPv4-mapped peer is its IPv4 address"
        );
        assert_eq!(of("10.0.0.2"), 7, "and so is an override written mapped");
        assert_eq!(of("fd00::1"), 2);
        assert_eq!(of("10.0.0.3"), 5);
        assert_eq!(
            PerIpLimit::unlimited().for_ip("10.0.0.1".parse().unwrap()),
            usize::MAX
        );
    }
}
