//! Shared by the transport tests (and the transport bench): an echo server running an
//! `EventLoop` on its own thread, on a plain or a TLS listener, stopped through a watched
//! eventfd (a second one carries commands: swap the TLS config, list TLS peers), plus bounded
//! wait helpers.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::Bytes;
use engine::sim::XorShift64;
use net::transport::{CloseReason, Config, ConnId, Event, EventLoop, Features, Stats, TlsPeerInfo};
use net::wire::frame::size_prefix;
use rustls::ServerConfig;

/// Every wait in these tests gives up (and fails) after this long.
pub const PATIENCE: Duration = Duration::from_secs(30);

pub fn loopback() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// What the echo server saw, streamed to the test as it happens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seen {
    Accepted(ConnId),
    Frame(ConnId, usize),
    Closed(ConnId, CloseReason),
}

pub struct ServerReport {
    pub stats: Stats,
    pub features: Features,
    pub connections_at_stop: usize,
    /// The most received-but-undelivered bytes seen after any poll.
    pub max_buffered_bytes: usize,
    pub buffered_at_stop: usize,
}

impl ServerReport {
    /// Asserts that the server never held more than `budget` received-but-undelivered bytes
    /// (`Config::max_buffered_bytes`): how the buffer-budget tests end.
    #[track_caller]
    pub fn assert_within_budget(&self, budget: usize) {
        assert!(
            self.max_buffered_bytes <= budget,
            "buffered {} bytes, budget {budget}",
            self.max_buffered_bytes
        );
    }
}

/// What a test asks of a running echo server.
enum Command {
    Reload(Arc<ServerConfig>),
    Peers(mpsc::Sender<Vec<(ConnId, TlsPeerInfo)>>),
}

/// An echo server: every frame comes back on its connection.
pub struct EchoServer {
    pub addr: SocketAddr,
    pub seen: mpsc::Receiver<Seen>,
    stop: OwnedFd,
    control: OwnedFd,
    commands: mpsc::Sender<Command>,
    thread: Option<JoinHandle<ServerReport>>,
}

pub fn eventfd() -> OwnedFd {
    // SAFETY: plain syscall; the descriptor is owned by the returned OwnedFd.
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    assert!(fd >= 0, "eventfd: {}", std::io::Error::last_os_error());
    // SAFETY: fd is a fresh descriptor nobody else owns.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

pub fn write_eventfd(fd: &OwnedFd, value: u64) {
    let bytes = value.to_ne_bytes();
    // SAFETY: writes 8 bytes from a live array.
    let n = unsafe { libc::write(fd.as_raw_fd(), bytes.as_ptr().cast(), 8) };
    assert_eq!(n, 8, "eventfd write: {}", std::io::Error::last_os_error());
}

/// The frames among `events`, in order.
pub fn frames(events: &[Event]) -> Vec<Bytes> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Frame { bytes, .. } => Some(bytes.clone()),
            _ => None,
        })
        .collect()
}

/// A frame as a chain: size prefix, then the body.
pub fn frame_chain(body: Bytes) -> Vec<Bytes> {
    vec![Bytes::copy_from_slice(&size_prefix(body.len())), body]
}

/// A body of `len` bytes whose content depends on `seed` and the position.
pub fn pattern(len: usize, seed: u64) -> Bytes {
    XorShift64(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
        .bytes(len)
        .into()
}

impl EchoServer {
    /// On a plain listener.
    pub fn start(config: Config) -> Self {
        Self::spawn(config, None)
    }

    /// On a TLS listener with `tls`.
    pub fn start_tls(config: Config, tls: Arc<ServerConfig>) -> Self {
        Self::spawn(config, Some(tls))
    }

    fn spawn(config: Config, tls: Option<Arc<ServerConfig>>) -> Self {
        let (stop, control) = (eventfd(), eventfd());
        let fds = (stop.as_raw_fd(), control.as_raw_fd());
        let (addr_tx, addr_rx) = mpsc::channel();
        let (seen_tx, seen) = mpsc::channel();
        let (commands, command_rx) = mpsc::channel();
        let thread =
            std::thread::spawn(move || serve(config, tls, fds, addr_tx, seen_tx, command_rx));
        let addr = addr_rx.recv_timeout(PATIENCE).expect("echo server started");
        Self {
            addr,
            seen,
            stop,
            control,
            commands,
            thread: Some(thread),
        }
    }

    /// Swap the TLS listener's config (done before this returns).
    pub fn reload(&self, tls: Arc<ServerConfig>) {
        self.commands.send(Command::Reload(tls)).unwrap();
        write_eventfd(&self.control, 1);
        // A Peers round trip proves the reload was handled (commands run in order).
        self.peers();
    }

    /// The server's open TLS connections past their handshake.
    pub fn peers(&self) -> Vec<(ConnId, TlsPeerInfo)> {
        let (tx, rx) = mpsc::channel();
        self.commands.send(Command::Peers(tx)).unwrap();
        write_eventfd(&self.control, 1);
        rx.recv_timeout(PATIENCE).expect("peers answered")
    }

    /// The next thing the server saw; fails the test after PATIENCE.
    pub fn next_seen(&self) -> Seen {
        self.seen
            .recv_timeout(PATIENCE)
            .expect("the echo server reported in time")
    }

    /// Wait until `count` items matching `want` have been seen; returns everything seen.
    pub fn wait_for(&self, count: usize, want: impl Fn(&Seen) -> bool) -> Vec<Seen> {
        let mut all = Vec::new();
        let mut matched = 0;
        while matched < count {
            let seen = self.next_seen();
            matched += usize::from(want(&seen));
            all.push(seen);
        }
        all
    }

    pub fn stop(mut self) -> ServerReport {
        write_eventfd(&self.stop, 1);
        self.thread
            .take()
            .unwrap()
            .join()
            .expect("echo server thread")
    }
}

impl Drop for EchoServer {
    fn drop(&mut self) {
        if let Some(thread) = self.thread.take() {
            write_eventfd(&self.stop, 1);
            let _ = thread.join();
        }
    }
}

fn serve(
    config: Config,
    tls: Option<Arc<ServerConfig>>,
    (stop_fd, control_fd): (i32, i32),
    addr_tx: mpsc::Sender<SocketAddr>,
    seen_tx: mpsc::Sender<Seen>,
    commands: mpsc::Receiver<Command>,
) -> ServerReport {
    let mut ring = EventLoop::new(config).expect("server ring");
    let listener = match tls {
        Some(tls) => ring.listen_tls(loopback(), tls).expect("listen_tls"),
        None => ring.listen(loopback()).expect("listen"),
    };
    let stop = ring.watch_eventfd(stop_fd).expect("watch stop eventfd");
    ring.watch_eventfd(control_fd)
        .expect("watch control eventfd");
    addr_tx.send(ring.local_addr(listener).unwrap()).unwrap();
    let started = Instant::now();
    let mut events = Vec::new();
    let mut max_buffered = 0;
    'serve: while started.elapsed() < PATIENCE * 4 {
        ring.poll(Some(Duration::from_millis(100)), &mut events)
            .expect("server poll");
        max_buffered = max_buffered.max(ring.buffered_bytes());
        for event in events.drain(..) {
            let seen = match event {
                Event::Accepted { conn, .. } => Seen::Accepted(conn),
                Event::Frame { conn, bytes } => {
                    let len = bytes.len();
                    // The connection may be closing already; then the echo is moot.
                    let _ = ring.send(conn, frame_chain(bytes));
                    Seen::Frame(conn, len)
                }
                Event::Closed { conn, reason } => Seen::Closed(conn, reason),
                Event::EventFd { id, .. } if id == stop => break 'serve,
                Event::EventFd { .. } => {
                    while let Ok(command) = commands.try_recv() {
                        match command {
                            Command::Reload(tls) => ring.set_listener_tls(listener, tls).unwrap(),
                            Command::Peers(reply) => {
                                let _ = reply.send(ring.tls_connections());
                            }
                        }
                    }
                    continue;
                }
                other => panic!("echo server got {other:?}"),
            };
            let _ = seen_tx.send(seen);
        }
    }
    ServerReport {
        stats: ring.stats(),
        features: ring.features(),
        connections_at_stop: ring.connection_count(),
        max_buffered_bytes: max_buffered,
        buffered_at_stop: ring.buffered_bytes(),
    }
}

/// Poll `ring` until `done` says the collected events suffice; fails after PATIENCE.
pub fn poll_until(
    ring: &mut EventLoop,
    collected: &mut Vec<Event>,
    mut done: impl FnMut(&[Event]) -> bool,
) {
    let started = Instant::now();
    while !done(collected) {
        assert!(
            started.elapsed() < PATIENCE,
            "gave up waiting; got {collected:?}"
        );
        ring.poll(Some(Duration::from_millis(100)), collected)
            .expect("poll");
    }
}

/// One request/response round trip over a plain blocking socket.
pub fn std_round_trip(stream: &mut TcpStream, body: &[u8]) -> std::io::Result<Vec<u8>> {
    stream.write_all(&size_prefix(body.len()))?;
    stream.write_all(body)?;
    read_frame(stream)
}

pub fn read_frame(stream: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut prefix = [0u8; 4];
    stream.read_exact(&mut prefix)?;
    let mut body = vec![0u8; u32::from_be_bytes(prefix) as usize];
    stream.read_exact(&mut body)?;
    Ok(body)
}

pub fn std_client(addr: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect_timeout(&addr, PATIENCE).expect("connect");
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    stream.set_write_timeout(Some(PATIENCE)).unwrap();
    stream
}

/// True once the peer has closed: EOF or a reset, never a timeout.
pub fn closed_by_peer(stream: &mut TcpStream) -> bool {
    let mut sink = [0u8; 4096];
    loop {
        match stream.read(&mut sink) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
}

/// Poll until no ring operation is in flight (cancellations reaped); fails after PATIENCE.
pub fn settle(ring: &mut EventLoop, events: &mut Vec<Event>) {
    let started = Instant::now();
    while ring.operations_in_flight() > 0 {
        assert!(started.elapsed() < PATIENCE, "operations stayed in flight");
        ring.poll(Some(Duration::from_millis(10)), events)
            .expect("poll");
    }
}

/// A blocking client to `addr` from the loopback address `local`.
pub fn std_client_from(local: std::net::Ipv4Addr, addr: SocketAddr) -> TcpStream {
    let stream = net::client::tcp_connect_from(local, addr).expect("connect");
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    stream.set_write_timeout(Some(PATIENCE)).unwrap();
    stream
}
