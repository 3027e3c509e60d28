//! The loop itself: one ring, a slab of in-flight operations keyed by `user_data`, a slab of
//! connections and one of listeners. Every operation's memory (timespecs, iovecs, msghdrs,
//! fallback recv buffers, the Bytes being sent) is owned by the slab entry or the connection
//! until the operation's final completion, so the kernel never sees a dangling pointer.

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use bytes::Bytes;
use io_uring::types::{CancelBuilder, Fd, SubmitArgs, Timespec};
use io_uring::{cqueue, opcode, squeue, IoUring};
use tracing::{debug, warn};

use super::buf_ring::ProvidedBuffers;
use super::error::{CloseReason, ConnectError, Errno, TransportError};
use super::slab::{Slab, NO_KEY};
use super::socket::{self, RawAddr};
use super::{Config, ConnId, Event, Features, ListenerId, Stats, TimerId, WatchId};
use crate::wire::FrameDecoder;

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
}

struct Listener {
    fd: RawFd,
    accept_op: Option<u64>,
    multishot: bool,
    closing: bool,
    /// Accept failed for lack of descriptors or memory; re-armed when a connection closes.
    paused: bool,
}

enum ConnState {
    Connecting,
    Open,
    /// Waiting for the connection's operations to finish; then the socket is closed and
    /// `Report` becomes the event.
    Closing(Report),
}

enum Report {
    Closed(CloseReason),
    ConnectFailed(ConnectError),
}

struct Conn {
    fd: RawFd,
    state: ConnState,
    decoder: FrameDecoder,
    send_queue: VecDeque<Vec<Bytes>>,
    queued_bytes: usize,
    sending: Option<Box<SendState>>,
    recv_op: Option<u64>,
    /// Live entries of the op slab that belong to this connection.
    ops_in_flight: u32,
    /// Fallback receive buffer when there is no provided buffer ring.
    recv_buf: Option<Box<[u8]>>,
    /// Kept until the connect completes (the kernel reads them at submission).
    connect_addr: Option<Box<RawAddr>>,
    connect_timeout: Option<Box<Timespec>>,
}

impl Conn {
    fn new(fd: RawFd, state: ConnState, decoder: FrameDecoder) -> Self {
        Self {
            fd,
            state,
            decoder,
            send_queue: VecDeque::new(),
            queued_bytes: 0,
            sending: None,
            recv_op: None,
            ops_in_flight: 0,
            recv_buf: None,
            connect_addr: None,
            connect_timeout: None,
        }
    }

    fn is_closing(&self) -> bool {
        matches!(self.state, ConnState::Closing(_))
    }
}

/// One sendmsg in flight: the pieces of one or more queued frames, a cursor into them, and the
/// iovec array and msghdr the kernel reads. Boxed so their addresses stay put.
struct SendState {
    pieces: Vec<Bytes>,
    piece: usize,
    offset: usize,
    iovecs: Vec<libc::iovec>,
    msg: libc::msghdr,
}

impl SendState {
    fn new(pieces: Vec<Bytes>) -> Box<Self> {
        assert!(!pieces.is_empty());
        assert!(pieces.iter().all(|p| !p.is_empty()));
        Box::new(Self {
            iovecs: Vec::with_capacity(pieces.len().min(IOV_MAX)),
            pieces,
            piece: 0,
            offset: 0,
            // SAFETY: msghdr is plain old data; zeroed means no name, no control data.
            msg: unsafe { std::mem::zeroed() },
        })
    }

    fn remaining(&self) -> usize {
        self.pieces[self.piece..]
            .iter()
            .map(Bytes::len)
            .sum::<usize>()
            - self.offset
    }

    /// Point the msghdr at the unsent rest (at most IOV_MAX pieces of it).
    fn prepare(&mut self) -> *const libc::msghdr {
        assert!(self.piece < self.pieces.len());
        self.iovecs.clear();
        for (i, piece) in self.pieces[self.piece..].iter().take(IOV_MAX).enumerate() {
            let skip = if i == 0 { self.offset } else { 0 };
            assert!(skip < piece.len());
            self.iovecs.push(libc::iovec {
                // The kernel only reads through this pointer.
                iov_base: piece[skip..].as_ptr() as *mut libc::c_void,
                iov_len: piece.len() - skip,
            });
        }
        self.msg.msg_iov = self.iovecs.as_mut_ptr();
        self.msg.msg_iovlen = self.iovecs.len();
        &self.msg
    }

    /// Account for `sent` bytes; true when everything is sent.
    fn advance(&mut self, mut sent: usize) -> bool {
        assert!(
            sent <= self.remaining(),
            "kernel reported more sent than asked"
        );
        while sent > 0 {
            let left_in_piece = self.pieces[self.piece].len() - self.offset;
            if sent < left_in_piece {
                self.offset += sent;
                sent = 0;
            } else {
                sent -= left_in_piece;
                self.piece += 1;
                self.offset = 0;
            }
        }
        self.piece == self.pieces.len()
    }
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
    /// Events produced since the last `poll` returned.
    ready: Vec<Event>,
    /// Completions copied out of the ring, not yet handled.
    backlog: Vec<(u64, i32, u32)>,
}

fn is_unavailable(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOSYS) | Some(libc::EPERM))
}

fn build_ring(config: &Config) -> Result<(IoUring, bool), TransportError> {
    let entries = config.ring_entries;
    let cq_entries = entries.saturating_mul(4);
    if config.try_single_issuer {
        let built = IoUring::builder()
            .setup_single_issuer()
            .setup_defer_taskrun()
            .setup_coop_taskrun()
            .setup_cqsize(cq_entries)
            .build(entries);
        match built {
            Ok(ring) => return Ok((ring, true)),
            Err(e) if is_unavailable(&e) => {
                return Err(TransportError::IoUringUnavailable { source: e })
            }
            Err(e) => warn!(
                error = %e,
                "kernel refused SINGLE_ISSUER|DEFER_TASKRUN|COOP_TASKRUN; using a plain ring"
            ),
        }
    }
    match IoUring::builder().setup_cqsize(cq_entries).build(entries) {
        Ok(ring) => Ok((ring, false)),
        Err(e) if is_unavailable(&e) => Err(TransportError::IoUringUnavailable { source: e }),
        Err(e) => Err(TransportError::RingSetup { entries, source: e }),
    }
}

/// A kernel timespec for `d`; seconds beyond i64 (which would turn negative, EINVAL) saturate.
fn timespec(d: Duration) -> Timespec {
    Timespec::new()
        .sec(d.as_secs().min(i64::MAX as u64))
        .nsec(d.subsec_nanos())
}

fn enter_error(source: io::Error) -> TransportError {
    TransportError::Enter { source }
}

impl EventLoop {
    /// Must be called on the thread that will poll it (the ring is set up single-issuer).
    pub fn new(config: Config) -> Result<Self, TransportError> {
        assert!(config.max_frame_bytes >= 8);
        let (ring, single_issuer) = build_ring(&config)?;
        let provided = if config.use_buf_ring {
            match ProvidedBuffers::register(
                &ring.submitter(),
                RECV_GROUP,
                config.recv_buffer_count,
                config.recv_buffer_size,
            ) {
                Ok(provided) => Some(provided),
                Err(e) => {
                    warn!(error = %e, "no provided buffer ring; one recv buffer per connection");
                    None
                }
            }
        } else {
            None
        };
        let features = Features {
            single_issuer_defer_taskrun: single_issuer,
            buf_ring: provided.is_some(),
            multishot_accept: config.use_multishot_accept,
        };
        Ok(Self {
            ring,
            ops: Slab::new(),
            conns: Slab::new(),
            listeners: Slab::new(),
            provided,
            config,
            features,
            stats: Stats::default(),
            buffered_bytes: 0,
            ready: Vec::new(),
            backlog: Vec::new(),
        })
    }

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

    // ---- listening -------------------------------------------------------------------------

    pub fn listen(&mut self, addr: SocketAddr) -> Result<ListenerId, TransportError> {
        let fd = socket::listener(addr, self.config.listen_backlog).map_err(|source| {
            TransportError::Socket {
                op: "listen",
                addr,
                source,
            }
        })?;
        let key = self.listeners.insert(Listener {
            fd,
            accept_op: None,
            multishot: self.features.multishot_accept,
            closing: false,
            paused: false,
        });
        self.arm_accept(key)?;
        Ok(ListenerId(key))
    }

    pub fn local_addr(&self, listener: ListenerId) -> Result<SocketAddr, TransportError> {
        let l = self
            .listeners
            .get(listener.0)
            .ok_or(TransportError::UnknownListener(listener.0))?;
        socket::local_addr(l.fd).map_err(|source| TransportError::Socket {
            op: "getsockname",
            addr: SocketAddr::from(([0, 0, 0, 0], 0)),
            source,
        })
    }

    /// Stop accepting; the socket closes once its accept is cancelled.
    pub fn close_listener(&mut self, listener: ListenerId) -> Result<(), TransportError> {
        let l = self
            .listeners
            .get_mut(listener.0)
            .ok_or(TransportError::UnknownListener(listener.0))?;
        if l.closing {
            return Ok(());
        }
        l.closing = true;
        match l.accept_op {
            Some(op) => self.push(
                opcode::AsyncCancel2::new(CancelBuilder::user_data(op).all())
                    .build()
                    .user_data(IGNORED),
            ),
            None => {
                let l = self.listeners.remove(listener.0).expect("listener present");
                socket::close(l.fd);
                Ok(())
            }
        }
    }

    fn arm_accept(&mut self, key: u64) -> Result<(), TransportError> {
        let l = self.listeners.get_mut(key).expect("listener present");
        if l.closing {
            return Ok(());
        }
        let entry = if l.multishot {
            opcode::AcceptMulti::new(Fd(l.fd))
                .flags(libc::SOCK_CLOEXEC)
                .build()
        } else {
            opcode::Accept::new(Fd(l.fd), std::ptr::null_mut(), std::ptr::null_mut())
                .flags(libc::SOCK_CLOEXEC)
                .build()
        };
        let op = match l.accept_op {
            Some(op) => op,
            None => {
                let op = self.ops.insert(Op::Accept { listener: key });
                self.listeners
                    .get_mut(key)
                    .expect("listener present")
                    .accept_op = Some(op);
                op
            }
        };
        self.push(entry.user_data(op))
    }

    fn on_accept(&mut self, op: u64, key: u64, res: i32, more: bool) -> Result<(), TransportError> {
        let l = self
            .listeners
            .get_mut(key)
            .expect("accept op of a live listener");
        assert_eq!(l.accept_op, Some(op));
        if res >= 0 {
            if l.closing {
                socket::close(res);
            } else {
                self.adopt(key, res)?;
            }
        } else if res == -libc::EINVAL && l.multishot && !more {
            warn!("multishot accept refused; re-arming single-shot accepts");
            l.multishot = false;
            self.features.multishot_accept = false;
        } else if matches!(
            -res,
            libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM
        ) {
            warn!(error = %Errno(-res), "accept paused until a connection closes");
            l.paused = true;
        } else if res != -libc::ECANCELED {
            debug!(error = %Errno(-res), "accept failed");
        }
        if more {
            return Ok(());
        }
        let l = self.listeners.get_mut(key).expect("listener present");
        if l.closing || l.paused {
            l.accept_op = None;
            self.ops.remove(op).expect("accept op present");
            if l.closing {
                let l = self.listeners.remove(key).expect("listener present");
                socket::close(l.fd);
            }
            return Ok(());
        }
        self.arm_accept(key)
    }

    fn adopt(&mut self, listener: u64, fd: RawFd) -> Result<(), TransportError> {
        if self.conns.len() >= self.config.max_connections {
            socket::close(fd);
            self.stats.refused += 1;
            debug!(max = self.config.max_connections, "connection refused");
            return Ok(());
        }
        let peer = match socket::peer_addr(fd) {
            Ok(peer) => peer,
            Err(e) => {
                // The peer reset before we looked.
                debug!(error = %e, "accepted connection gone already");
                socket::close(fd);
                return Ok(());
            }
        };
        self.configure(fd);
        let decoder = FrameDecoder::for_requests(self.config.max_frame_bytes);
        let key = self.conns.insert(Conn::new(fd, ConnState::Open, decoder));
        self.stats.accepted += 1;
        self.ready.push(Event::Accepted {
            listener: ListenerId(listener),
            conn: ConnId(key),
            peer,
        });
        self.arm_recv(key)
    }

    /// Socket options are best effort: a failure costs latency or a test's partial sends, not
    /// correctness.
    fn configure(&self, fd: RawFd) {
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
        let fd = socket::tcp_socket(addr).map_err(|source| TransportError::Socket {
            op: "socket",
            addr,
            source,
        })?;
        self.configure(fd);
        let decoder = FrameDecoder::for_responses(self.config.max_frame_bytes);
        let mut conn = Conn::new(fd, ConnState::Connecting, decoder);
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

    fn on_connect(&mut self, op: u64, key: u64, res: i32) -> Result<(), TransportError> {
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
            self.ready.push(Event::Connected { conn: ConnId(key) });
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

    fn arm_recv(&mut self, key: u64) -> Result<(), TransportError> {
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

    fn on_recv(&mut self, op: u64, key: u64, res: i32, flags: u32) -> Result<(), TransportError> {
        let bid = cqueue::buffer_select(flags);
        let more = cqueue::more(flags);
        let conn = self
            .conns
            .get_mut(key)
            .expect("recv op of a live connection");
        assert_eq!(conn.recv_op, Some(op));
        if res > 0 && !conn.is_closing() {
            let n = res as usize;
            let before = conn.decoder.buffered();
            match (bid, &self.provided) {
                (Some(bid), Some(provided)) => conn.decoder.extend(provided.filled(bid, n)),
                (None, None) => conn
                    .decoder
                    .extend(&conn.recv_buf.as_ref().expect("recv buffer")[..n]),
                _ => panic!("a receive's buffer selection must match the loop's mode"),
            }
            self.buffered_bytes += conn.decoder.buffered() - before;
            self.stats.bytes_received += n as u64;
        }
        if let Some(bid) = bid {
            self.provided
                .as_mut()
                .expect("a selected buffer implies provided buffers")
                .recycle(bid);
        }
        if res > 0 {
            self.deliver_frames(key)?;
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
        let before = conn.decoder.buffered();
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
        self.buffered_bytes -= before - after;
        if failure.is_none() && self.buffered_bytes > self.config.max_buffered_bytes {
            failure = Some(CloseReason::BufferLimit {
                limit: self.config.max_buffered_bytes,
            });
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
    /// pieces are sent in order without copying and released once the kernel has taken them.
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
        self.start_send(conn.0)
    }

    /// Submit the next sendmsg if the connection is open and has none in flight. Queued frames
    /// are batched into one sendmsg while they fit in IOV_MAX iovecs.
    fn start_send(&mut self, key: u64) -> Result<(), TransportError> {
        let conn = self.conns.get_mut(key).expect("connection present");
        if conn.sending.is_some()
            || !matches!(conn.state, ConnState::Open)
            || conn.send_queue.is_empty()
        {
            return Ok(());
        }
        let mut pieces = Vec::new();
        while let Some(frame) = conn.send_queue.front() {
            let count = frame.iter().filter(|p| !p.is_empty()).count();
            if !pieces.is_empty() && pieces.len() + count > IOV_MAX {
                break;
            }
            let frame = conn.send_queue.pop_front().expect("front exists");
            conn.queued_bytes -= frame.iter().map(Bytes::len).sum::<usize>();
            pieces.extend(frame.into_iter().filter(|p| !p.is_empty()));
        }
        let mut state = SendState::new(pieces);
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

    fn on_send(&mut self, op: u64, key: u64, res: i32) -> Result<(), TransportError> {
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
        conn.sending = None;
        self.drop_conn_op(key, op)?;
        self.start_send(key)
    }

    // ---- closing ---------------------------------------------------------------------------

    /// Close a connection: queued sends are dropped, in-flight operations cancelled, and
    /// `Closed { reason: Local }` is reported once the socket is closed.
    pub fn close(&mut self, conn: ConnId) -> Result<(), TransportError> {
        if self.conns.get(conn.0).is_none() {
            return Err(TransportError::UnknownConnection(conn));
        }
        self.begin_close(conn.0, Report::Closed(CloseReason::Local))
    }

    fn begin_close(&mut self, key: u64, report: Report) -> Result<(), TransportError> {
        let conn = self.conns.get_mut(key).expect("connection present");
        if conn.is_closing() {
            return Ok(());
        }
        conn.state = ConnState::Closing(report);
        conn.send_queue.clear();
        conn.queued_bytes = 0;
        // Received bytes of a closing connection are never delivered: free them now, so the
        // budget is back before the cancellations complete.
        self.buffered_bytes -= conn.decoder.buffered();
        conn.decoder = FrameDecoder::for_responses(self.config.max_frame_bytes);
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

    fn resume_paused_listeners(&mut self) {
        for key in self.listeners.keys() {
            let l = self.listeners.get_mut(key).expect("listed key");
            if l.paused && !l.closing {
                l.paused = false;
                if let Err(e) = self.arm_accept(key) {
                    warn!(error = %e, "re-arming accept");
                }
            }
        }
    }

    fn new_conn_op(&mut self, key: u64, op: Op) -> u64 {
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

    // ---- timers and eventfds ---------------------------------------------------------------

    /// A timer that fires once after `after` (a ring timeout, so `poll` wakes for it).
    pub fn add_timer(&mut self, after: Duration) -> Result<TimerId, TransportError> {
        let timespec = Box::new(timespec(after));
        let ptr: *const Timespec = &*timespec;
        let op = self.ops.insert(Op::Timer {
            _timespec: timespec,
            cancelled: false,
        });
        self.push(opcode::Timeout::new(ptr).build().user_data(op))?;
        Ok(TimerId(op))
    }

    pub fn add_timer_at(&mut self, deadline: Instant) -> Result<TimerId, TransportError> {
        self.add_timer(deadline.saturating_duration_since(Instant::now()))
    }

    /// True if the timer was pending; it will not be reported after this.
    pub fn cancel_timer(&mut self, id: TimerId) -> Result<bool, TransportError> {
        match self.ops.get_mut(id.0) {
            Some(Op::Timer { cancelled, .. }) if !*cancelled => {
                *cancelled = true;
                self.push(opcode::TimeoutRemove::new(id.0).build().user_data(IGNORED))?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    fn on_timer(&mut self, op: u64, res: i32) {
        if res != -libc::ETIME && res != -libc::ECANCELED {
            // Reported anyway: waking early is harmless, never waking is not.
            warn!(error = %Errno(-res), "timer failed");
        }
        match self.ops.remove(op) {
            Some(Op::Timer { cancelled, .. }) => {
                if !cancelled {
                    self.ready.push(Event::TimerFired { id: TimerId(op) })
                }
            }
            _ => unreachable!("timer completion of a non-timer op"),
        }
    }

    /// Report writes to a non-blocking eventfd (EFD_NONBLOCK) as `Event::EventFd`; the loop
    /// reads (and so resets) the counter. The caller keeps the descriptor open until
    /// [`EventLoop::unwatch`] and the loop's drop.
    pub fn watch_eventfd(&mut self, fd: RawFd) -> Result<WatchId, TransportError> {
        // SAFETY: plain syscall.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
        if flags < 0 {
            return Err(TransportError::BadEventFd {
                fd,
                reason: "not an open descriptor",
            });
        }
        if flags & libc::O_NONBLOCK == 0 {
            return Err(TransportError::BadEventFd {
                fd,
                reason:
                    "must be non-blocking (EFD_NONBLOCK): a second wake-up would block the loop",
            });
        }
        let op = self.ops.insert(Op::EventFdPoll {
            fd,
            cancelled: false,
        });
        self.arm_eventfd(op, fd)?;
        Ok(WatchId(op))
    }

    pub fn unwatch(&mut self, id: WatchId) -> Result<bool, TransportError> {
        match self.ops.get_mut(id.0) {
            Some(Op::EventFdPoll { cancelled, .. }) if !*cancelled => {
                *cancelled = true;
                self.push(opcode::PollRemove::new(id.0).build().user_data(IGNORED))?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    fn arm_eventfd(&mut self, op: u64, fd: RawFd) -> Result<(), TransportError> {
        self.push(
            opcode::PollAdd::new(Fd(fd), libc::POLLIN as u32)
                .multi(true)
                .build()
                .user_data(op),
        )
    }

    fn on_eventfd(&mut self, op: u64, res: i32, more: bool) -> Result<(), TransportError> {
        let (fd, cancelled) = match self.ops.get(op) {
            Some(Op::EventFdPoll { fd, cancelled }) => (*fd, *cancelled),
            _ => unreachable!("eventfd completion of another op"),
        };
        if !cancelled && res > 0 {
            let mut count = [0u8; 8];
            // SAFETY: reads at most 8 bytes into a live 8-byte array.
            let n = unsafe { libc::read(fd, count.as_mut_ptr().cast(), 8) };
            // Short or EAGAIN: a wake-up already consumed by an earlier read.
            if n == 8 {
                self.ready.push(Event::EventFd {
                    id: WatchId(op),
                    count: u64::from_ne_bytes(count),
                });
            }
        } else if res < 0 && res != -libc::ECANCELED {
            warn!(error = %Errno(-res), fd, "eventfd poll failed");
        }
        if more {
            return Ok(());
        }
        if cancelled || (res < 0 && res != -libc::ECANCELED) {
            self.ops.remove(op);
            return Ok(());
        }
        self.arm_eventfd(op, fd)
    }

    // ---- the ring --------------------------------------------------------------------------

    /// Submit what is queued, wait up to `timeout` (None: until something completes) for at
    /// least one completion, handle every completion, and append the resulting events.
    pub fn poll(
        &mut self,
        timeout: Option<Duration>,
        events: &mut Vec<Event>,
    ) -> Result<(), TransportError> {
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

    fn enter(&mut self, wait: Option<Duration>) -> Result<(), TransportError> {
        let result = match wait {
            None => self.ring.submit_and_wait(1),
            Some(wait) => {
                let timespec = timespec(wait);
                let args = SubmitArgs::new().timespec(&timespec);
                self.ring.submitter().submit_with_args(1, &args)
            }
        };
        match result {
            Ok(_) => Ok(()),
            // Timed out, interrupted, or the completion queue is full (we reap next).
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ETIME | libc::EINTR | libc::EBUSY)
                ) =>
            {
                Ok(())
            }
            Err(e) => Err(enter_error(e)),
        }
    }

    fn collect_completions(&mut self) {
        let mut cq = self.ring.completion();
        cq.sync();
        for cqe in &mut cq {
            self.backlog
                .push((cqe.user_data(), cqe.result(), cqe.flags()));
        }
    }

    fn reap(&mut self) -> Result<(), TransportError> {
        self.collect_completions();
        let mut batch = Vec::new();
        while !self.backlog.is_empty() {
            std::mem::swap(&mut batch, &mut self.backlog);
            for (user_data, res, flags) in batch.drain(..) {
                self.complete(user_data, res, flags)?;
            }
        }
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
        }
    }

    fn push(&mut self, entry: squeue::Entry) -> Result<(), TransportError> {
        self.make_room(1)?;
        // SAFETY: every pointer in the entry (timespecs, addresses, msghdrs, iovecs, recv
        // buffers) is owned by an op-slab entry or its connection and stays alive until the
        // operation's final completion has been reaped.
        unsafe { self.ring.submission().push(&entry) }.expect("room was made");
        Ok(())
    }

    /// Two linked entries must enter the queue together, or the link would break.
    fn push_linked(
        &mut self,
        first: squeue::Entry,
        second: squeue::Entry,
    ) -> Result<(), TransportError> {
        self.make_room(2)?;
        // SAFETY: as in `push`.
        unsafe { self.ring.submission().push_multiple(&[first, second]) }.expect("room was made");
        Ok(())
    }

    fn make_room(&mut self, needed: usize) -> Result<(), TransportError> {
        for _ in 0..PUSH_ATTEMPTS {
            {
                let sq = self.ring.submission();
                if sq.capacity() - sq.len() >= needed {
                    return Ok(());
                }
            }
            match self.ring.submit() {
                Ok(_) => {}
                Err(e) if matches!(e.raw_os_error(), Some(libc::EBUSY | libc::EAGAIN)) => {
                    // The completion queue is full: take completions out (handled in poll).
                    self.collect_completions();
                }
                Err(e) => return Err(enter_error(e)),
            }
        }
        Err(enter_error(io::Error::other(
            "submission queue stayed full after repeated submits",
        )))
    }

    /// Cancel everything and wait (bounded) for the kernel to finish with the memory the
    /// operations point at.
    fn shut_down(&mut self) -> Result<(), TransportError> {
        for key in self.listeners.keys() {
            self.close_listener(ListenerId(key))?;
        }
        for key in self.conns.keys() {
            self.begin_close(key, Report::Closed(CloseReason::Local))?;
        }
        for key in self.ops.keys() {
            match self.ops.get_mut(key) {
                Some(Op::Timer { cancelled, .. }) | Some(Op::EventFdPoll { cancelled, .. }) => {
                    *cancelled = true
                }
                _ => {}
            }
        }
        self.push(
            opcode::AsyncCancel2::new(CancelBuilder::any())
                .build()
                .user_data(IGNORED),
        )?;
        for _ in 0..100 {
            if self.ops.is_empty() {
                break;
            }
            self.enter(Some(Duration::from_millis(10)))?;
            self.reap()?;
        }
        self.ready.clear();
        Ok(())
    }
}

impl Drop for EventLoop {
    fn drop(&mut self) {
        if let Err(e) = self.shut_down() {
            warn!(error = %e, "event loop shut down uncleanly");
        }
        if !self.ops.is_empty() {
            warn!(ops = self.ops.len(), "operations still in flight at drop");
        }
        for key in self.conns.keys() {
            socket::close(self.conns.get(key).expect("listed key").fd);
        }
        for key in self.listeners.keys() {
            socket::close(self.listeners.get(key).expect("listed key").fd);
        }
        if let Some(provided) = &self.provided {
            if let Err(e) = self.ring.submitter().unregister_buf_ring(provided.group()) {
                debug!(error = %e, "unregistering the provided buffers");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iov_bytes(state: &SendState) -> Vec<u8> {
        state
            .iovecs
            .iter()
            .flat_map(|iov| {
                // SAFETY: the iovecs point into the state's live pieces.
                unsafe { std::slice::from_raw_parts(iov.iov_base as *const u8, iov.iov_len) }
                    .to_vec()
            })
            .collect()
    }

    #[test]
    fn send_state_resumes_mid_piece_and_caps_iovecs() {
        let pieces: Vec<Bytes> = (0..IOV_MAX + 10)
            .map(|i| Bytes::from(vec![i as u8; 3]))
            .collect();
        let all: Vec<u8> = pieces.iter().flat_map(|p| p.to_vec()).collect();
        let mut state = SendState::new(pieces);
        state.prepare();
        assert_eq!(state.iovecs.len(), IOV_MAX);
        assert_eq!(state.msg.msg_iovlen, IOV_MAX);
        // A short send ending inside the second piece.
        assert!(!state.advance(4));
        state.prepare();
        assert_eq!(iov_bytes(&state)[..], all[4..4 + iov_bytes(&state).len()]);
        assert_eq!(state.remaining(), all.len() - 4);
        assert!(!state.advance(3 * IOV_MAX));
        state.prepare();
        assert_eq!(iov_bytes(&state)[..], all[4 + 3 * IOV_MAX..]);
        assert!(state.advance(state.remaining()));
    }
}
