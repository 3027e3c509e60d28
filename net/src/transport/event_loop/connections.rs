//! Connections: their state and the memory their operations use, socket options, connecting
//! (with a linked timeout), receiving into the frame decoder (provided buffers or one buffer
//! per connection) and handing out whole frames within the buffered-bytes budget, the send
//! queue and its batched sendmsgs, and closing (cancel what is in flight, then close the
//! socket and report). Also the per-connection count of operations in flight that decides
//! when a closing connection may be closed.

use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::RawFd;

use bytes::Bytes;
use io_uring::types::{CancelBuilder, Fd, Timespec};
use io_uring::{cqueue, opcode, squeue};
use tracing::debug;

use super::ring::timespec;
use super::send_state::{SendState, SEND_STATE_POOL};
use super::{EventLoop, Op, IGNORED, IOV_MAX};
use crate::transport::error::{CloseReason, ConnectError, Errno, TransportError};
use crate::transport::socket::{self, RawAddr};
use crate::transport::tls::{Fed, TlsSession};
use crate::transport::{ConnId, Event};
use crate::wire::FrameDecoder;

pub(super) enum ConnState {
    Connecting,
    Open,
    /// Waiting for the connection's operations to finish; then the socket is closed and
    /// `Report` becomes the event.
    Closing(Report),
}

pub(super) enum Report {
    Closed(CloseReason),
    ConnectFailed(ConnectError),
}

pub(super) struct Conn {
    pub(super) fd: RawFd,
    state: ConnState,
    decoder: FrameDecoder,
    pub(super) send_queue: VecDeque<Vec<Bytes>>,
    pub(super) queued_bytes: usize,
    pub(super) sending: Option<Box<SendState>>,
    /// Listed in the loop's `unflushed`: its queued frames wait for the next flush.
    unflushed: bool,
    recv_op: Option<u64>,
    /// Live entries of the op slab that belong to this connection.
    ops_in_flight: u32,
    /// Fallback receive buffer when there is no provided buffer ring.
    recv_buf: Option<Box<[u8]>>,
    /// Kept until the connect completes (the kernel reads them at submission).
    connect_addr: Option<Box<RawAddr>>,
    connect_timeout: Option<Box<Timespec>>,
    /// Opened by `connect`/`connect_tls` (else accepted).
    pub(super) outbound: bool,
    /// The listener that accepted it, which counts it against its limit while it is open.
    pub(super) listener: Option<u64>,
    /// Its peer's address as the listener counts it against its per-address limit.
    pub(super) peer_ip: Option<IpAddr>,
    /// `Connected` was reported (outbound only).
    pub(super) connected_reported: bool,
    /// The TLS session, if the connection is TLS; dropped when the connection starts closing.
    pub(super) tls: Option<Box<TlsSession>>,
    /// The TLS handshake finished.
    pub(super) tls_established: bool,
    /// The pending handshake deadline (an op-slab key).
    pub(super) tls_timer: Option<u64>,
    /// How far into the front queued frame encryption has got: piece index and offset.
    pub(super) tls_cursor: (usize, usize),
}

impl Conn {
    pub(super) fn new(fd: RawFd, state: ConnState, decoder: FrameDecoder) -> Self {
        Self {
            fd,
            state,
            decoder,
            send_queue: VecDeque::new(),
            queued_bytes: 0,
            sending: None,
            unflushed: false,
            recv_op: None,
            ops_in_flight: 0,
            recv_buf: None,
            connect_addr: None,
            connect_timeout: None,
            outbound: false,
            listener: None,
            peer_ip: None,
            connected_reported: false,
            tls: None,
            tls_established: false,
            tls_timer: None,
            tls_cursor: (0, 0),
        }
    }

    pub(super) fn is_closing(&self) -> bool {
        matches!(self.state, ConnState::Closing(_))
    }

    pub(super) fn is_open(&self) -> bool {
        matches!(self.state, ConnState::Open)
    }

    /// Received bytes held for this connection: undelivered plaintext plus a TLS record in
    /// progress.
    fn held(&self) -> usize {
        self.decoder.buffered() + self.tls.as_ref().map_or(0, |t| t.buffered())
    }

    fn budget(&self) -> Budget {
        match self.listener {
            _ if self.outbound => Budget::Outbound,
            Some(key) => Budget::Listener(key),
            None => Budget::Unbudgeted,
        }
    }
}

/// Which receive budget (`Config::max_buffered_bytes`) a connection's received-but-undelivered
/// bytes count against: its listener's, or the one of the connections this loop opened. Like
/// the connection limits, each counts apart, so clients that fill a client listener's budget
/// cannot make a voter's connection the one that crosses it.
#[derive(Clone, Copy)]
enum Budget {
    Listener(u64),
    Outbound,
    /// Accepted by a listener that has closed since: counted in the loop's total only.
    Unbudgeted,
}

impl EventLoop {
    fn budget_mut(&mut self, budget: Budget) -> Option<&mut usize> {
        match budget {
            Budget::Listener(key) => self.listeners.get_mut(key).map(|l| &mut l.buffered),
            Budget::Outbound => Some(&mut self.outbound_buffered),
            Budget::Unbudgeted => None,
        }
    }

    /// A connection of `budget` went from holding `before` received bytes to `after`.
    fn rebudget(&mut self, budget: Budget, before: usize, after: usize) {
        self.buffered_bytes = self.buffered_bytes + after - before;
        if let Some(used) = self.budget_mut(budget) {
            *used = *used + after - before;
        }
    }

    /// Socket options are best effort: a failure costs latency or a test's partial sends, not
    /// correctness.
    pub(super) fn configure(&self, fd: RawFd) {
        if let Err(e) = socket::set_nodelay(fd) {
            debug!(error = %e, "TCP_NODELAY");
        }
        if let Some(bytes) = self.config.send_buffer_bytes {
            if let Err(e) = socket::set_send_buffer(fd, bytes) {
                debug!(error = %e, "SO_SNDBUF");
            }
        }
    }

    // ---- connecting ------------------------------------------------------------------------

    /// Start connecting; `Connected` or `ConnectFailed` follows (after at most the configured
    /// connect timeout). Sends may be queued at once.
    pub fn connect(&mut self, addr: SocketAddr) -> Result<ConnId, TransportError> {
        self.connect_with(addr, None)
    }

    pub(super) fn connect_with(
        &mut self,
        addr: SocketAddr,
        tls: Option<Box<TlsSession>>,
    ) -> Result<ConnId, TransportError> {
        let fd = socket::tcp_socket(addr).map_err(|source| TransportError::Socket {
            op: "socket",
            addr,
            source,
        })?;
        self.configure(fd);
        let decoder = FrameDecoder::for_responses(self.config.max_frame_bytes);
        let mut conn = Conn::new(fd, ConnState::Connecting, decoder);
        conn.outbound = true;
        conn.tls = tls;
        let raw = Box::new(RawAddr::from_socket_addr(addr));
        let timeout = Box::new(timespec(self.config.connect_timeout));
        let connect = opcode::Connect::new(Fd(fd), raw.as_ptr(), raw.len).build();
        let link_timeout = opcode::LinkTimeout::new(&*timeout).build();
        conn.connect_addr = Some(raw);
        conn.connect_timeout = Some(timeout);
        let key = self.conns.insert(conn);
        let op = self.new_conn_op(key, Op::Connect { conn: key });
        self.push_linked(
            connect.user_data(op).flags(squeue::Flags::IO_LINK),
            link_timeout.user_data(IGNORED),
        )?;
        Ok(ConnId(key))
    }

    pub(super) fn on_connect(&mut self, op: u64, key: u64, res: i32) -> Result<(), TransportError> {
        let conn = self
            .conns
            .get_mut(key)
            .expect("connect op of a live connection");
        conn.connect_addr = None;
        conn.connect_timeout = None;
        if conn.is_closing() {
            return self.drop_conn_op(key, op);
        }
        assert!(matches!(conn.state, ConnState::Connecting));
        if res == 0 {
            conn.state = ConnState::Open;
            // A TLS connection reports Connected once its handshake is over.
            if conn.tls.is_none() {
                conn.connected_reported = true;
                self.ready.push(Event::Connected { conn: ConnId(key) });
            }
            self.drop_conn_op(key, op)?;
            self.arm_recv(key)?;
            return self.start_send(key);
        }
        // The link timeout cancels the connect when it fires.
        let error = if res == -libc::ECANCELED {
            ConnectError::TimedOut
        } else {
            ConnectError::Failed(Errno(-res))
        };
        self.begin_close(key, Report::ConnectFailed(error))?;
        self.drop_conn_op(key, op)
    }

    // ---- receiving -------------------------------------------------------------------------

    pub(super) fn arm_recv(&mut self, key: u64) -> Result<(), TransportError> {
        let buffer_size = self.config.recv_buffer_size;
        let conn = self.conns.get_mut(key).expect("connection present");
        assert!(matches!(conn.state, ConnState::Open));
        let entry = match &self.provided {
            Some(provided) => opcode::RecvMulti::new(Fd(conn.fd), provided.group()).build(),
            None => {
                let buf = conn
                    .recv_buf
                    .get_or_insert_with(|| vec![0u8; buffer_size as usize].into_boxed_slice());
                opcode::Recv::new(Fd(conn.fd), buf.as_mut_ptr(), buffer_size).build()
            }
        };
        let op = match conn.recv_op {
            Some(op) => op,
            None => {
                let op = self.new_conn_op(key, Op::Recv { conn: key });
                self.conns.get_mut(key).expect("connection present").recv_op = Some(op);
                op
            }
        };
        self.push(entry.user_data(op))
    }

    pub(super) fn on_recv(
        &mut self,
        op: u64,
        key: u64,
        res: i32,
        flags: u32,
    ) -> Result<(), TransportError> {
        let bid = cqueue::buffer_select(flags);
        let more = cqueue::more(flags);
        let conn = self
            .conns
            .get_mut(key)
            .expect("recv op of a live connection");
        assert_eq!(conn.recv_op, Some(op));
        let mut tls_outcome = None;
        if res > 0 && !conn.is_closing() {
            let n = res as usize;
            let (before, budget) = (conn.held(), conn.budget());
            let data = match (bid, &self.provided) {
                (Some(bid), Some(provided)) => provided.filled(bid, n),
                (None, None) => &conn.recv_buf.as_ref().expect("recv buffer")[..n],
                _ => panic!("a receive's buffer selection must match the loop's mode"),
            };
            match conn.tls.as_mut() {
                None => conn.decoder.extend(data),
                Some(tls) => {
                    let decoder = &mut conn.decoder;
                    tls_outcome = Some(tls.feed(data, &mut |plain| decoder.extend(plain)));
                }
            }
            let after = conn.held();
            self.rebudget(budget, before, after);
            self.stats.bytes_received += n as u64;
        }
        if let Some(bid) = bid {
            self.provided
                .as_mut()
                .expect("a selected buffer implies provided buffers")
                .recycle(bid);
        }
        match tls_outcome {
            Some(Err(failure)) => self.fail_tls(key, failure.0)?,
            Some(Ok(Fed { peer_closed })) => {
                self.after_tls_input(key)?;
                self.deliver_frames(key)?;
                if peer_closed {
                    self.begin_close(key, Report::Closed(CloseReason::PeerClosed))?;
                }
            }
            None if res > 0 => self.deliver_frames(key)?,
            None => {}
        }
        if more {
            return Ok(());
        }
        // The receive is over: re-arm it, or end the connection.
        let conn = self.conns.get_mut(key).expect("connection present");
        if conn.is_closing() {
            conn.recv_op = None;
            return self.drop_conn_op(key, op);
        }
        if res > 0 || res == -libc::ENOBUFS {
            // Single-shot mode, or the kernel ended the multishot (buffers ran out: we have
            // just recycled them).
            return self.arm_recv(key);
        }
        let reason = match res {
            0 => CloseReason::PeerClosed,
            r if r == -libc::ECONNRESET => CloseReason::PeerClosed,
            r => CloseReason::Recv(Errno(-r)),
        };
        conn.recv_op = None;
        self.begin_close(key, Report::Closed(reason))?;
        self.drop_conn_op(key, op)
    }

    fn deliver_frames(&mut self, key: u64) -> Result<(), TransportError> {
        let conn = self.conns.get_mut(key).expect("connection present");
        if conn.is_closing() {
            return Ok(());
        }
        let (before, budget) = (conn.decoder.buffered(), conn.budget());
        let mut failure = None;
        loop {
            match conn.decoder.next_frame() {
                Ok(Some(bytes)) => {
                    self.stats.frames_received += 1;
                    self.ready.push(Event::Frame {
                        conn: ConnId(key),
                        bytes,
                    });
                }
                Ok(None) => break,
                Err(e) => {
                    failure = Some(CloseReason::Frame(e));
                    break;
                }
            }
        }
        let after = conn.decoder.buffered();
        self.rebudget(budget, before, after);
        let limit = self.config.max_buffered_bytes;
        if failure.is_none() && self.budget_mut(budget).is_some_and(|used| *used > limit) {
            failure = Some(CloseReason::BufferLimit { limit });
        }
        match failure {
            Some(reason) => {
                debug!(%reason, "closing connection");
                self.begin_close(key, Report::Closed(reason))
            }
            None => Ok(()),
        }
    }

    // ---- sending ---------------------------------------------------------------------------

    /// Queue one frame given as a chain of pieces (size prefix, header, payload slices...). The
    /// pieces are sent in order without copying and released once the kernel has taken them;
    /// the sendmsg starts at the next `poll`, with every other frame queued before it.
    pub fn send(&mut self, conn: ConnId, chain: Vec<Bytes>) -> Result<(), TransportError> {
        let c = self
            .conns
            .get_mut(conn.0)
            .ok_or(TransportError::UnknownConnection(conn))?;
        if c.is_closing() {
            return Err(TransportError::ConnectionClosing { conn });
        }
        let len: usize = chain.iter().map(Bytes::len).sum();
        if len == 0 {
            return Err(TransportError::EmptySend);
        }
        c.queued_bytes += len;
        c.send_queue.push_back(chain);
        self.defer_send(conn.0);
        Ok(())
    }

    /// List the connection for the next flush (once).
    fn defer_send(&mut self, key: u64) {
        let conn = self.conns.get_mut(key).expect("connection present");
        if !conn.unflushed {
            conn.unflushed = true;
            self.unflushed.push(key);
        }
    }

    /// Start the sendmsg of every connection with frames queued since the last flush. Called
    /// just before the ring is entered: a round of events that answers several requests of one
    /// connection sends them in one sendmsg, and wakes its peer once.
    pub(super) fn flush_sends(&mut self) -> Result<(), TransportError> {
        let mut keys = std::mem::take(&mut self.unflushed);
        // Every listed connection is unlisted first, so that one failed start leaves none
        // marked as listed without being in the list (its sends could never be flushed).
        keys.retain(|&key| match self.conns.get_mut(key) {
            Some(conn) => {
                conn.unflushed = false;
                true
            }
            // Closed since it was listed (a slot that holds a newer connection is kept:
            // starting its send early is harmless).
            None => false,
        });
        let result = keys.iter().try_for_each(|&key| self.start_send(key));
        // Keep the allocation for the next round (starting a send lists nothing).
        keys.clear();
        if self.unflushed.is_empty() {
            self.unflushed = keys;
        }
        result
    }

    /// Submit the next sendmsg if the connection is open and has none in flight. Queued frames
    /// are batched into one sendmsg while they fit in IOV_MAX iovecs.
    pub(super) fn start_send(&mut self, key: u64) -> Result<(), TransportError> {
        let conn = self.conns.get_mut(key).expect("connection present");
        if conn.sending.is_some() || !matches!(conn.state, ConnState::Open) {
            return Ok(());
        }
        if conn.tls.is_some() {
            return self.start_tls_send(key);
        }
        if conn.send_queue.is_empty() {
            return Ok(());
        }
        let mut state = self.send_pool.pop().unwrap_or_else(SendState::empty);
        while let Some(frame) = conn.send_queue.front() {
            let count = frame.iter().filter(|p| !p.is_empty()).count();
            if state.piece_count() > 0 && state.piece_count() + count > IOV_MAX {
                break;
            }
            let frame = conn.send_queue.pop_front().expect("front exists");
            conn.queued_bytes -= frame.iter().map(Bytes::len).sum::<usize>();
            for piece in frame.into_iter().filter(|p| !p.is_empty()) {
                state.push_piece(piece);
            }
        }
        self.submit_send(key, state)
    }

    /// Keeps a finished sendmsg's state for the next one (bounded: see `SEND_STATE_POOL`).
    pub(super) fn keep_send_state(&mut self, state: Box<SendState>) {
        if self.send_pool.len() < SEND_STATE_POOL {
            self.send_pool.extend(state.recycle());
        }
    }

    /// Hand one sendmsg to the ring; the connection has none in flight.
    pub(super) fn submit_send(
        &mut self,
        key: u64,
        mut state: Box<SendState>,
    ) -> Result<(), TransportError> {
        let conn = self.conns.get_mut(key).expect("connection present");
        assert!(conn.sending.is_none());
        let msg = state.prepare();
        let fd = conn.fd;
        conn.sending = Some(state);
        let op = self.new_conn_op(key, Op::Send { conn: key });
        self.push(
            opcode::SendMsg::new(Fd(fd), msg)
                .flags(libc::MSG_NOSIGNAL as u32)
                .build()
                .user_data(op),
        )
    }

    pub(super) fn on_send(&mut self, op: u64, key: u64, res: i32) -> Result<(), TransportError> {
        let conn = self
            .conns
            .get_mut(key)
            .expect("send op of a live connection");
        assert!(conn.sending.is_some(), "a send completion without a send");
        if conn.is_closing() {
            conn.sending = None;
            return self.drop_conn_op(key, op);
        }
        if res <= 0 {
            // A zero-byte send of a non-empty iovec means the socket is unusable.
            let errno = if res == 0 { libc::EPIPE } else { -res };
            conn.sending = None;
            self.begin_close(key, Report::Closed(CloseReason::Send(Errno(errno))))?;
            return self.drop_conn_op(key, op);
        }
        self.stats.sends += 1;
        self.stats.bytes_sent += res as u64;
        let state = conn.sending.as_mut().expect("checked above");
        if !state.advance(res as usize) {
            self.stats.partial_sends += 1;
            let msg = state.prepare();
            let fd = conn.fd;
            return self.push(
                opcode::SendMsg::new(Fd(fd), msg)
                    .flags(libc::MSG_NOSIGNAL as u32)
                    .build()
                    .user_data(op),
            );
        }
        let mut sent = conn.sending.take().expect("checked above");
        if conn.tls.is_some() {
            self.reclaim_tls_buffer(sent.take_pieces());
        }
        self.keep_send_state(sent);
        self.drop_conn_op(key, op)?;
        // Frames queued while this sendmsg was in flight (and, over TLS, records rustls wants
        // sent) go at the next flush, with whatever this round of events adds.
        self.defer_send(key);
        Ok(())
    }

    // ---- closing ---------------------------------------------------------------------------

    /// Close a connection: queued sends are dropped, in-flight operations cancelled, and
    /// `Closed { reason: Local }` is reported once the socket is closed.
    /// A TLS connection sends its close_notify first when nothing else is being sent.
    pub fn close(&mut self, conn: ConnId) -> Result<(), TransportError> {
        let c = self
            .conns
            .get_mut(conn.0)
            .ok_or(TransportError::UnknownConnection(conn))?;
        if c.is_open() && c.tls_established && c.sending.is_none() {
            if let Some(tls) = c.tls.as_mut() {
                tls.close_notify();
                let mut out = Vec::new();
                tls.take_output(&mut out);
                socket::send_now(c.fd, &out);
            }
        }
        self.begin_close(conn.0, Report::Closed(CloseReason::Local))
    }

    pub(super) fn begin_close(&mut self, key: u64, report: Report) -> Result<(), TransportError> {
        let conn = self.conns.get_mut(key).expect("connection present");
        if conn.is_closing() {
            return Ok(());
        }
        // An outbound TLS connection whose handshake never finished never opened.
        let report = match report {
            Report::Closed(reason)
                if conn.tls.is_some()
                    && conn.outbound
                    && !conn.connected_reported
                    && reason != CloseReason::Local =>
            {
                Report::ConnectFailed(match reason {
                    CloseReason::TlsHandshakeTimeout => ConnectError::TlsHandshakeTimeout,
                    CloseReason::Tls(why) => ConnectError::Tls(why),
                    other => ConnectError::Tls(other.to_string()),
                })
            }
            report => report,
        };
        conn.state = ConnState::Closing(report);
        conn.send_queue.clear();
        conn.queued_bytes = 0;
        // Received bytes of a closing connection are never delivered: free them now, so the
        // budget is back before the cancellations complete.
        let (held, budget) = (conn.held(), conn.budget());
        self.rebudget(budget, held, 0);
        let conn = self.conns.get_mut(key).expect("connection present");
        conn.decoder = FrameDecoder::for_responses(self.config.max_frame_bytes);
        conn.tls = None;
        if let Some(timer) = conn.tls_timer.take() {
            self.cancel_tls_handshake_timer(timer)?;
        }
        let conn = self.conns.get_mut(key).expect("connection present");
        if conn.ops_in_flight == 0 {
            self.finish_close(key);
            return Ok(());
        }
        // Shutdown wakes a blocked recv or send at once; the cancel covers a pending connect.
        // SAFETY: plain syscall on a descriptor we own; ENOTCONN is expected and harmless.
        unsafe { libc::shutdown(conn.fd, libc::SHUT_RDWR) };
        let fd = conn.fd;
        self.push(
            opcode::AsyncCancel2::new(CancelBuilder::fd(Fd(fd)).all())
                .build()
                .user_data(IGNORED),
        )
    }

    fn finish_close(&mut self, key: u64) {
        let conn = self.conns.remove(key).expect("connection present");
        assert_eq!(conn.ops_in_flight, 0);
        if let Some(l) = conn.listener.and_then(|key| self.listeners.get_mut(key)) {
            l.open = l.open.checked_sub(1).expect("counted when accepted");
            l.forget_peer(
                conn.peer_ip
                    .expect("an accepted connection has its peer's address"),
            );
        }
        assert!(conn.sending.is_none());
        socket::close(conn.fd);
        assert_eq!(conn.decoder.buffered(), 0, "freed by begin_close");
        let id = ConnId(key);
        match conn.state {
            ConnState::Closing(Report::Closed(reason)) => {
                self.ready.push(Event::Closed { conn: id, reason })
            }
            ConnState::Closing(Report::ConnectFailed(error)) => {
                self.ready.push(Event::ConnectFailed { conn: id, error })
            }
            _ => unreachable!("finish_close of a connection that is not closing"),
        }
        self.resume_paused_listeners();
    }

    pub(super) fn new_conn_op(&mut self, key: u64, op: Op) -> u64 {
        let conn = self.conns.get_mut(key).expect("connection present");
        conn.ops_in_flight += 1;
        self.ops.insert(op)
    }

    /// The operation is over; a closing connection with nothing left in flight is closed.
    fn drop_conn_op(&mut self, key: u64, op: u64) -> Result<(), TransportError> {
        self.ops.remove(op).expect("op present");
        let conn = self.conns.get_mut(key).expect("connection present");
        assert!(conn.ops_in_flight > 0);
        conn.ops_in_flight -= 1;
        if conn.ops_in_flight == 0 && conn.is_closing() {
            self.finish_close(key);
        }
        Ok(())
    }
}
