//! The loop itself: one ring, a slab of in-flight operations keyed by `user_data`, a slab of
//! connections and one of listeners. Every operation's memory (timespecs, iovecs, msghdrs,
//! fallback recv buffers, the Bytes being sent) is owned by the slab entry or the connection
//! until the operation's final completion, so the kernel never sees a dangling pointer.
//!
//! This file holds the [`EventLoop`] type, the operation records its slab keeps, `poll`, and the
//! dispatch of each completion to its handler. Ring set-up, submission and shut-down live in
//! `ring`; listening and accepting in `listener`; connecting, receiving, sending and closing in
//! `connections` (with the sendmsg cursor in `send_state`); timers and eventfd watches in
//! `timers`; TLS listeners, connections, handshake deadlines and encryption in `tls`.

mod connections;
mod listener;
mod ring;
mod send_state;
mod timers;
mod tls;

use std::os::fd::RawFd;
use std::time::Duration;

use io_uring::types::Timespec;
use io_uring::{cqueue, IoUring};

use super::buf_ring::ProvidedBuffers;
use super::error::TransportError;
use super::slab::{Slab, NO_KEY};
use super::{Config, ConnId, Event, Features, Stats};
use connections::Conn;
use listener::Listener;

/// The most iovecs one sendmsg takes (Linux UIO_MAXIOV).
const IOV_MAX: usize = 1024;
/// user_data of requests whose completions carry nothing for us (cancels, timeout removals,
/// link timeouts): their targets report through their own completions.
const IGNORED: u64 = NO_KEY;
/// Buffer group id of the provided receive buffers.
const RECV_GROUP: u16 = 0;
/// Bound on how often `push` retries a full submission queue before giving up.
const PUSH_ATTEMPTS: usize = 64;

enum Op {
    Accept {
        listener: u64,
    },
    Connect {
        conn: u64,
    },
    Recv {
        conn: u64,
    },
    Send {
        conn: u64,
    },
    /// The timespec is read by the kernel at submission; kept until the completion anyway.
    Timer {
        _timespec: Box<Timespec>,
        cancelled: bool,
    },
    EventFdPoll {
        fd: RawFd,
        cancelled: bool,
    },
    /// A TLS connection's handshake deadline; not one of the connection's operations (a close
    /// removes it with TIMEOUT_REMOVE instead of waiting for it).
    TlsHandshakeTimer {
        conn: u64,
        _timespec: Box<Timespec>,
        cancelled: bool,
    },
}

impl Op {
    /// The `cancelled` flag of an op that is cancelled by removing it from the ring (a timer, an
    /// eventfd watch, a handshake timer); None for the socket ops, which end with their socket.
    fn cancelled_mut(&mut self) -> Option<&mut bool> {
        match self {
            Op::Timer { cancelled, .. }
            | Op::EventFdPoll { cancelled, .. }
            | Op::TlsHandshakeTimer { cancelled, .. } => Some(cancelled),
            Op::Accept { .. } | Op::Connect { .. } | Op::Recv { .. } | Op::Send { .. } => None,
        }
    }
}

/// The part of an [`Op`] a completion handler needs, copied out so the handler can borrow the
/// loop mutably.
#[derive(Clone, Copy)]
enum OpKind {
    Accept(u64),
    Connect(u64),
    Recv(u64),
    Send(u64),
    Timer,
    EventFdPoll,
    TlsHandshakeTimer(u64),
}

pub struct EventLoop {
    // Dropped first: closing the ring ends the kernel's use of everything below.
    ring: IoUring,
    ops: Slab<Op>,
    conns: Slab<Conn>,
    listeners: Slab<Listener>,
    provided: Option<ProvidedBuffers>,
    config: Config,
    features: Features,
    stats: Stats,
    buffered_bytes: usize,
    /// The part of `buffered_bytes` held by connections this loop opened (their own budget).
    outbound_buffered: usize,
    /// Events produced since the last `poll` returned.
    ready: Vec<Event>,
    /// Completions copied out of the ring, not yet handled.
    backlog: Vec<(u64, i32, u32)>,
    /// The completions being handled by `reap`, kept empty between polls.
    reaping: Vec<(u64, i32, u32)>,
    /// Connections with frames queued since the last `poll` and no sendmsg started for them:
    /// their sendmsgs start just before the next submission, so every frame queued in one round
    /// of events goes out in one sendmsg per connection (docs/architecture.md, "Transport").
    unflushed: Vec<u64>,
    /// Encryption buffers of finished TLS sendmsgs, kept for the next ones (tls.rs).
    tls_out_pool: Vec<Vec<u8>>,
    /// States of finished sendmsgs, kept for the next ones (send_state.rs). Boxed because that
    /// is how a sendmsg in flight holds its state (the kernel reads it at a fixed address):
    /// keeping the box is what saves the allocation.
    #[allow(clippy::vec_box)]
    send_pool: Vec<Box<send_state::SendState>>,
}

impl EventLoop {
    pub fn features(&self) -> Features {
        self.features
    }

    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// Received bytes not yet handed out as frames, over all connections.
    pub fn buffered_bytes(&self) -> usize {
        self.buffered_bytes
    }

    /// Connections open, connecting or closing.
    pub fn connection_count(&self) -> usize {
        self.conns.len()
    }

    /// In-flight ring operations (for tests and leak checks).
    pub fn operations_in_flight(&self) -> usize {
        self.ops.len()
    }

    /// Bytes queued on `conn` and not yet handed to the kernel.
    pub fn queued_send_bytes(&self, conn: ConnId) -> Option<usize> {
        let c = self.conns.get(conn.0)?;
        Some(c.queued_bytes + c.sending.as_ref().map_or(0, |s| s.remaining()))
    }

    /// Submit what is queued, wait up to `timeout` (None: until something completes) for at
    /// least one completion, handle every completion, and append the resulting events.
    pub fn poll(
        &mut self,
        timeout: Option<Duration>,
        events: &mut Vec<Event>,
    ) -> Result<(), TransportError> {
        // Flushed first: a send that fails at once (a TLS error) reports its close in `ready`,
        // and the ring must not then be waited on.
        self.flush_sends()?;
        let wait = if self.ready.is_empty() && self.backlog.is_empty() {
            timeout
        } else {
            Some(Duration::ZERO)
        };
        self.enter(wait)?;
        self.reap()?;
        events.append(&mut self.ready);
        Ok(())
    }

    fn reap(&mut self) -> Result<(), TransportError> {
        self.collect_completions();
        // The two vectors swap roles and both keep their room: a poll allocates nothing here.
        let mut batch = std::mem::take(&mut self.reaping);
        while !self.backlog.is_empty() {
            std::mem::swap(&mut batch, &mut self.backlog);
            for (user_data, res, flags) in batch.drain(..) {
                self.complete(user_data, res, flags)?;
            }
        }
        self.reaping = batch;
        Ok(())
    }

    fn complete(&mut self, user_data: u64, res: i32, flags: u32) -> Result<(), TransportError> {
        if user_data == IGNORED {
            return Ok(());
        }
        let kind = match self.ops.get(user_data) {
            Some(Op::Accept { listener }) => OpKind::Accept(*listener),
            Some(Op::Connect { conn }) => OpKind::Connect(*conn),
            Some(Op::Recv { conn }) => OpKind::Recv(*conn),
            Some(Op::Send { conn }) => OpKind::Send(*conn),
            Some(Op::Timer { .. }) => OpKind::Timer,
            Some(Op::EventFdPoll { .. }) => OpKind::EventFdPoll,
            Some(Op::TlsHandshakeTimer { conn, .. }) => OpKind::TlsHandshakeTimer(*conn),
            None => panic!("completion for unknown op {user_data:#x}"),
        };
        let more = cqueue::more(flags);
        match kind {
            OpKind::Accept(listener) => self.on_accept(user_data, listener, res, more),
            OpKind::Connect(conn) => self.on_connect(user_data, conn, res),
            OpKind::Recv(conn) => self.on_recv(user_data, conn, res, flags),
            OpKind::Send(conn) => self.on_send(user_data, conn, res),
            OpKind::Timer => {
                self.on_timer(user_data, res);
                Ok(())
            }
            OpKind::EventFdPoll => self.on_eventfd(user_data, res, more),
            OpKind::TlsHandshakeTimer(conn) => self.on_tls_handshake_timer(user_data, conn, res),
        }
    }
}
