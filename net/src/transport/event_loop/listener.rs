//! Listening sockets: opening them, keeping an accept (multishot where the kernel allows)
//! armed on each, adopting accepted connections up to the connection limit, pausing accepts
//! while descriptors or memory run out and resuming them when a connection closes, and
//! closing a listener once its accept is cancelled.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::RawFd;
use std::sync::Arc;

use io_uring::opcode;
use io_uring::types::{CancelBuilder, Fd};
use tracing::{debug, warn};

use super::connections::{Conn, ConnState};
use super::{EventLoop, Op, IGNORED};
use crate::transport::error::{Errno, TransportError};
use crate::transport::socket;
use crate::transport::tls::TlsSession;
use crate::transport::{ConnId, Event, ListenerId, PerIpLimit};
use crate::wire::FrameDecoder;

pub(super) struct Listener {
    pub(super) fd: RawFd,
    accept_op: Option<u64>,
    multishot: bool,
    closing: bool,
    /// Accept failed for lack of descriptors or memory; re-armed when a connection closes.
    paused: bool,
    /// Accepted connections speak TLS with this config (swapped by `set_listener_tls`).
    pub(super) tls: Option<Arc<rustls::ServerConfig>>,
    /// Connections this listener keeps open at once; one more is closed at once.
    max_connections: usize,
    /// Its accepted connections not yet closed. Each listener counts its own, so clients that
    /// fill one listener never shut the voters out of another.
    pub(super) open: usize,
    /// Connections it keeps open at once from one address.
    per_ip_limit: PerIpLimit,
    /// Its open connections by peer address; an address with none has no entry, so the map
    /// holds at most `open` entries.
    per_ip: HashMap<IpAddr, usize>,
    /// Received bytes of its connections not yet handed out as frames, against
    /// `Config::max_buffered_bytes`.
    pub(super) buffered: usize,
}

impl Listener {
    /// One of its connections from `ip` closed.
    pub(super) fn forget_peer(&mut self, ip: IpAddr) {
        let open = self
            .per_ip
            .get_mut(&ip)
            .expect("an open connection is counted under its address");
        *open -= 1;
        if *open == 0 {
            self.per_ip.remove(&ip);
        }
        self.check_counts();
    }

    /// Every open connection is counted under exactly one address.
    fn check_counts(&self) {
        debug_assert_eq!(self.per_ip.values().sum::<usize>(), self.open);
    }
}

impl EventLoop {
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
            tls: None,
            max_connections: self.config.max_connections,
            open: 0,
            per_ip_limit: PerIpLimit::unlimited(),
            per_ip: HashMap::new(),
            buffered: 0,
        });
        self.arm_accept(key)?;
        Ok(ListenerId(key))
    }

    /// The listener `listener`, or the error naming it.
    pub(super) fn listener_mut(
        &mut self,
        listener: ListenerId,
    ) -> Result<&mut Listener, TransportError> {
        self.listeners
            .get_mut(listener.0)
            .ok_or(TransportError::UnknownListener(listener.0))
    }

    /// How many connections `listener` keeps open at once (`Config::max_connections` until
    /// set); lowering it closes none of those already open.
    pub fn set_listener_max_connections(
        &mut self,
        listener: ListenerId,
        max_connections: usize,
    ) -> Result<(), TransportError> {
        let l = self.listener_mut(listener)?;
        l.max_connections = max_connections;
        Ok(())
    }

    /// How many connections `listener` keeps open at once from one address (no limit until
    /// set); lowering it closes none of those already open.
    pub fn set_listener_per_ip_limit(
        &mut self,
        listener: ListenerId,
        limit: PerIpLimit,
    ) -> Result<(), TransportError> {
        let l = self.listener_mut(listener)?;
        l.per_ip_limit = limit;
        Ok(())
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
        let l = self.listener_mut(listener)?;
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
                self.remove_listener(listener.0);
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

    pub(super) fn on_accept(
        &mut self,
        op: u64,
        key: u64,
        res: i32,
        more: bool,
    ) -> Result<(), TransportError> {
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
            warn!(
                "multishot accept refused; re-arming single-shot accepts (one submission per \
                 connection; nothing to do, Linux 5.19 or later has multishot accept)"
            );
            l.multishot = false;
            self.features.multishot_accept = false;
        } else if matches!(
            -res,
            libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM
        ) {
            warn!(error = %Errno(-res), "accept paused until a connection closes: raise the open-file limit (`ulimit -n`, \
                 LimitNOFILE= in a systemd unit) or find the client that holds connections");
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
                self.remove_listener(key);
            }
            return Ok(());
        }
        self.arm_accept(key)
    }

    /// Closes a listener's socket and forgets it; its connections stay open, counted by none
    /// (the slab's keys are generational: no later listener takes its count).
    fn remove_listener(&mut self, key: u64) {
        let l = self.listeners.remove(key).expect("listener present");
        socket::close(l.fd);
    }

    fn adopt(&mut self, listener: u64, fd: RawFd) -> Result<(), TransportError> {
        let l = self.listeners.get_mut(listener).expect("listener present");
        if l.open >= l.max_connections {
            socket::close(fd);
            self.stats.refused += 1;
            debug!(max = l.max_connections, "connection refused");
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
        let ip = peer.ip().to_canonical();
        let l = self.listeners.get_mut(listener).expect("listener present");
        let limit = l.per_ip_limit.for_ip(ip);
        if l.per_ip.get(&ip).copied().unwrap_or(0) >= limit {
            socket::close(fd);
            self.stats.refused_per_ip += 1;
            debug!(%ip, max = limit, "connection refused: as many open from its address as allowed");
            return Ok(());
        }
        let tls = match &self.listeners.get(listener).expect("listener present").tls {
            Some(config) => match TlsSession::server(config.clone(), Some(ListenerId(listener))) {
                Ok(session) => Some(Box::new(session)),
                Err(e) => {
                    warn!(error = %e, "cannot start a TLS session; connection closed: check the listener's keystore \
                         (docs/security.md)");
                    socket::close(fd);
                    return Ok(());
                }
            },
            None => None,
        };
        self.configure(fd);
        let decoder = FrameDecoder::for_requests(self.config.max_frame_bytes);
        let mut conn = Conn::new(fd, ConnState::Open, decoder);
        let is_tls = tls.is_some();
        conn.tls = tls;
        conn.listener = Some(listener);
        conn.peer_ip = Some(ip);
        let key = self.conns.insert(conn);
        let l = self.listeners.get_mut(listener).expect("listener present");
        l.open += 1;
        *l.per_ip.entry(ip).or_insert(0) += 1;
        l.check_counts();
        if is_tls {
            self.start_tls_handshake_timer(key)?;
        }
        self.stats.accepted += 1;
        self.ready.push(Event::Accepted {
            listener: ListenerId(listener),
            conn: ConnId(key),
            peer,
        });
        self.arm_recv(key)
    }

    pub(super) fn resume_paused_listeners(&mut self) {
        for key in self.listeners.keys() {
            let l = self.listeners.get_mut(key).expect("listed key");
            if l.paused && !l.closing {
                l.paused = false;
                if let Err(e) = self.arm_accept(key) {
                    warn!(error = %e, "re-arming accept failed; if it repeats, new connections are not taken: restart the \
                         node and check the open-file limit (`ulimit -n`)");
                }
            }
        }
    }
}
