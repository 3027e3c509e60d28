//! TLS on the loop's connections (docs/architecture.md "Transport", docs/security.md "TLS"):
//! TLS listeners and their config swap, outbound TLS connections, the handshake deadline, what
//! happens once a receive has been fed to the session (handshake over: `Connected` for an
//! outbound connection, queued sends start), encrypting queued frames into one buffer per
//! sendmsg, failing a connection after sending rustls's alert, and the peer information the
//! owner reads.

use std::io::IoSlice;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use io_uring::opcode;
use io_uring::types::Timespec;
use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ServerConfig};
use tracing::debug;

use super::connections::Report;
use super::ring::timespec;
use super::send_state::SendState;
use super::{EventLoop, Op, IOV_MAX};
use crate::transport::error::{CloseReason, TransportError};
use crate::transport::socket;
use crate::transport::tls::{TlsPeerInfo, TlsSession};
use crate::transport::{ConnId, Event, ListenerId};

/// Plaintext bytes encrypted for one sendmsg; the next chunk is encrypted when it completes.
const TLS_SEND_CHUNK: usize = 256 * 1024;
/// Room in an encryption buffer: a whole chunk, its records' headers and tags (under 40 bytes
/// per 16 KiB record), and what rustls has queued besides (handshake flights, tickets, alerts).
const TLS_OUT_CAPACITY: usize = TLS_SEND_CHUNK + 64 * 1024;
/// Encryption buffers kept for reuse once their sendmsg is done. A buffer this size comes from
/// mmap, or from heap the allocator trims: a new one per sendmsg cost a page fault and a zeroed
/// page for every 4 KiB sent, a fifth of the leader's time with 8 TLS observers
/// (docs/benchmarks.md, "Encryption buffers reused").
const TLS_OUT_POOL: usize = 16;

impl EventLoop {
    /// Listen for TLS connections: each accepted connection handshakes with `config` before
    /// its first frame.
    pub fn listen_tls(
        &mut self,
        addr: SocketAddr,
        config: Arc<ServerConfig>,
    ) -> Result<ListenerId, TransportError> {
        let listener = self.listen(addr)?;
        self.set_listener_tls(listener, config)?;
        Ok(listener)
    }

    /// Connections this listener accepts from now on handshake with `config` (a certificate
    /// reload); open connections keep the session they have. A plain listener becomes a TLS one.
    pub fn set_listener_tls(
        &mut self,
        listener: ListenerId,
        config: Arc<ServerConfig>,
    ) -> Result<(), TransportError> {
        let l = self.listener_mut(listener)?;
        l.tls = Some(config);
        Ok(())
    }

    /// Connect and handshake as a TLS client, verifying the server as `name`. `Connected`
    /// follows once the handshake is over; a failed or late handshake is `ConnectFailed`.
    /// Sends may be queued at once: they are encrypted and sent after the handshake.
    pub fn connect_tls(
        &mut self,
        addr: SocketAddr,
        config: Arc<ClientConfig>,
        name: ServerName<'static>,
    ) -> Result<ConnId, TransportError> {
        let session = TlsSession::client(config, name).map_err(TransportError::TlsSetup)?;
        let conn = self.connect_with(addr, Some(Box::new(session)))?;
        self.start_tls_handshake_timer(conn.0)?;
        Ok(conn)
    }

    /// The TLS facts of an open connection whose handshake is over; None for plain,
    /// handshaking, closing or unknown connections.
    pub fn tls_peer(&self, conn: ConnId) -> Option<TlsPeerInfo> {
        let c = self.conns.get(conn.0)?;
        if !c.is_open() {
            return None;
        }
        c.tls.as_ref()?.peer_info()
    }

    /// Every open TLS connection past its handshake, with its peer's facts: after a
    /// certificate or truststore reload the owner re-checks the chains and closes the
    /// connections that no longer pass.
    pub fn tls_connections(&self) -> Vec<(ConnId, TlsPeerInfo)> {
        self.conns
            .keys()
            .into_iter()
            .filter_map(|key| Some((ConnId(key), self.tls_peer(ConnId(key))?)))
            .collect()
    }

    pub(super) fn start_tls_handshake_timer(&mut self, key: u64) -> Result<(), TransportError> {
        let timespec = Box::new(timespec(self.config.tls_handshake_timeout));
        let ptr: *const Timespec = &*timespec;
        let op = self.ops.insert(Op::TlsHandshakeTimer {
            conn: key,
            _timespec: timespec,
            cancelled: false,
        });
        self.conns
            .get_mut(key)
            .expect("connection present")
            .tls_timer = Some(op);
        self.push(opcode::Timeout::new(ptr).build().user_data(op))
    }

    pub(super) fn cancel_tls_handshake_timer(&mut self, op: u64) -> Result<(), TransportError> {
        let removal = opcode::TimeoutRemove::new(op).build();
        self.cancel_pending(op, |op| matches!(op, Op::TlsHandshakeTimer { .. }), removal)?;
        Ok(())
    }

    pub(super) fn on_tls_handshake_timer(
        &mut self,
        op: u64,
        key: u64,
        res: i32,
    ) -> Result<(), TransportError> {
        let cancelled = match self.ops.remove(op) {
            Some(Op::TlsHandshakeTimer { cancelled, .. }) => cancelled,
            _ => unreachable!("handshake timer completion of another op"),
        };
        if cancelled || res != -libc::ETIME {
            return Ok(());
        }
        let Some(conn) = self.conns.get_mut(key) else {
            return Ok(());
        };
        if conn.tls_timer != Some(op) {
            return Ok(());
        }
        conn.tls_timer = None;
        if conn.is_closing() || conn.tls_established {
            return Ok(());
        }
        debug!("TLS handshake timed out");
        self.begin_close(key, Report::Closed(CloseReason::TlsHandshakeTimeout))
    }

    /// After received bytes went through the session: note the end of the handshake, then
    /// send whatever the session or the queue has.
    pub(super) fn after_tls_input(&mut self, key: u64) -> Result<(), TransportError> {
        let conn = self.conns.get_mut(key).expect("connection present");
        if conn.is_closing() {
            return Ok(());
        }
        let handshaking = conn.tls.as_ref().is_some_and(|t| t.is_handshaking());
        if !conn.tls_established && !handshaking {
            conn.tls_established = true;
            if conn.outbound {
                conn.connected_reported = true;
                self.ready.push(Event::Connected { conn: ConnId(key) });
            }
            if let Some(timer) = conn.tls_timer.take() {
                self.cancel_tls_handshake_timer(timer)?;
            }
        }
        self.start_send(key)
    }

    /// Close after a TLS failure, sending rustls's alert first if no sendmsg is in flight (one
    /// would interleave with it).
    pub(super) fn fail_tls(&mut self, key: u64, why: String) -> Result<(), TransportError> {
        let conn = self.conns.get_mut(key).expect("connection present");
        if conn.is_closing() {
            return Ok(());
        }
        if conn.sending.is_none() {
            if let Some(tls) = conn.tls.as_mut() {
                let mut alert = Vec::new();
                tls.take_output(&mut alert);
                if !alert.is_empty() {
                    socket::send_now(conn.fd, &alert);
                }
            }
        }
        debug!(%why, "closing TLS connection");
        self.begin_close(key, Report::Closed(CloseReason::Tls(why)))
    }

    /// The TLS side of `start_send`: what the session wants sent (handshake, alerts, tickets)
    /// and, once the handshake is over, up to TLS_SEND_CHUNK bytes of queued frames encrypted
    /// into one buffer, sent as one piece.
    pub(super) fn start_tls_send(&mut self, key: u64) -> Result<(), TransportError> {
        let conn = self.conns.get_mut(key).expect("connection present");
        let tls = conn.tls.as_mut().expect("a TLS connection");
        let mut out = self.tls_out_pool.pop().unwrap_or_else(|| {
            self.stats.tls_buffers_allocated += 1;
            Vec::with_capacity(TLS_OUT_CAPACITY)
        });
        debug_assert!(out.is_empty());
        tls.take_output(&mut out);
        let mut failure = None;
        if !tls.is_handshaking() {
            let mut budget = TLS_SEND_CHUNK;
            while budget > 0 {
                let Some(frame) = conn.send_queue.front() else {
                    break;
                };
                let (first, offset) = conn.tls_cursor;
                let mut slices = Vec::new();
                let mut planned = 0;
                for (i, piece) in frame.iter().enumerate().skip(first) {
                    let start = if i == first { offset } else { 0 };
                    let take = (piece.len() - start).min(budget - planned);
                    if take > 0 {
                        slices.push(IoSlice::new(&piece[start..start + take]));
                        planned += take;
                    }
                    if planned == budget || slices.len() == IOV_MAX {
                        break;
                    }
                }
                let taken = match tls.encrypt(&slices, &mut out) {
                    Ok(taken) => taken,
                    Err(e) => {
                        failure = Some(e.0);
                        break;
                    }
                };
                debug_assert_eq!(taken, planned);
                // Move the cursor past what was taken; drop the frame once it is all taken.
                let (mut piece, mut offset) = conn.tls_cursor;
                let mut left = taken;
                while piece < frame.len() {
                    let rest = frame[piece].len() - offset;
                    if left < rest {
                        offset += left;
                        break;
                    }
                    left -= rest;
                    piece += 1;
                    offset = 0;
                }
                if piece == frame.len() {
                    conn.send_queue.pop_front();
                    conn.tls_cursor = (0, 0);
                } else {
                    conn.tls_cursor = (piece, offset);
                }
                conn.queued_bytes -= taken;
                budget -= taken;
            }
        }
        if let Some(why) = failure {
            return self.fail_tls(key, why);
        }
        if out.is_empty() {
            self.keep_tls_buffer(out);
            return Ok(());
        }
        let mut state = self.send_pool.pop().unwrap_or_else(SendState::empty);
        state.push_piece(Bytes::from(out));
        self.submit_send(key, state)
    }

    /// Take back a TLS connection's encryption buffer once its sendmsg is over, for the next.
    pub(super) fn reclaim_tls_buffer(&mut self, mut sent: Vec<Bytes>) {
        if let [piece] = &mut sent[..] {
            // Unique unless something else still holds the bytes; then it is simply dropped.
            if let Ok(buffer) = std::mem::take(piece).try_into_mut() {
                self.keep_tls_buffer(Vec::from(buffer));
            }
        }
    }

    fn keep_tls_buffer(&mut self, mut buffer: Vec<u8>) {
        // A buffer that grew far past the usual size (a large handshake flight) is not kept.
        let usual = (TLS_OUT_CAPACITY..=2 * TLS_OUT_CAPACITY).contains(&buffer.capacity());
        if usual && self.tls_out_pool.len() < TLS_OUT_POOL {
            buffer.clear();
            self.tls_out_pool.push(buffer);
        }
    }
}
