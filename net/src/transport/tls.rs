//! One connection's TLS state (rustls's buffered API, docs/architecture.md "Transport"): received
//! ciphertext goes in with `read_tls` straight from the receive buffer, records are decrypted by
//! `process_new_packets`, and the plaintext is handed to a sink (the connection's frame decoder)
//! as slices of rustls's own buffer. Outgoing frames are written into rustls as vectored slices
//! once the handshake is over and come back encrypted in a `Vec` the loop sends as one piece.
//!
//! What rustls holds between receives is one partial record (its bytes are tracked here from the
//! record headers, so the loop can count them into its buffered-bytes budget) and, during the
//! handshake only, the records of a handshake message not yet complete (rustls caps a handshake
//! message at 64 KiB). Its outgoing buffer is drained after every write, and capped by
//! `set_buffer_limit`.

use std::io::{BufRead, IoSlice, Write};
use std::sync::Arc;

use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{CipherSuite, ClientConfig, ClientConnection, Connection, ProtocolVersion};
use rustls::{ServerConfig, ServerConnection};

use super::ListenerId;

/// rustls's cap on its outgoing buffer of encrypted records; writes beyond it are taken in
/// steps, draining in between.
const BUFFER_LIMIT: usize = 64 * 1024;
/// A TLS record header: type, version, length.
const RECORD_HEADER: usize = 5;

/// What the loop knows of a connection's TLS once the handshake is over.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsPeerInfo {
    pub protocol_version: ProtocolVersion,
    pub cipher_suite: CipherSuite,
    /// The peer's certificate chain, leaf first; empty if it presented none.
    pub peer_certificates: Vec<CertificateDer<'static>>,
    /// The server name the client asked for (SNI), on accepted connections.
    pub server_name: Option<String>,
    /// The listener that accepted the connection; None for outbound connections.
    pub listener: Option<ListenerId>,
}

/// The handshake or a record failed; rustls has queued its alert when it could.
#[derive(Debug)]
pub struct TlsFailure(pub String);

/// What feeding received bytes did, beyond handing plaintext to the sink.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Fed {
    /// The peer sent close_notify: nothing more will be read.
    pub peer_closed: bool,
}

/// Follows the record boundaries of the received stream, to know how many bytes of a record not
/// yet complete rustls is holding.
#[derive(Default)]
struct RecordTracker {
    header: [u8; RECORD_HEADER],
    header_len: usize,
    /// Body bytes of the current record still to come.
    body_left: usize,
    /// Bytes of the current (incomplete) record seen so far.
    partial: usize,
}

impl RecordTracker {
    fn scan(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            if self.header_len < RECORD_HEADER {
                let take = (RECORD_HEADER - self.header_len).min(data.len());
                self.header[self.header_len..self.header_len + take].copy_from_slice(&data[..take]);
                self.header_len += take;
                self.partial += take;
                data = &data[take..];
                if self.header_len == RECORD_HEADER {
                    self.body_left =
                        usize::from(u16::from_be_bytes([self.header[3], self.header[4]]));
                }
            } else {
                let take = self.body_left.min(data.len());
                self.body_left -= take;
                self.partial += take;
                data = &data[take..];
            }
            if self.header_len == RECORD_HEADER && self.body_left == 0 {
                self.header_len = 0;
                self.partial = 0;
            }
        }
    }
}

/// A connection's TLS session (server or client side).
pub struct TlsSession {
    conn: Connection,
    tracker: RecordTracker,
    listener: Option<ListenerId>,
}

impl TlsSession {
    pub fn server(
        config: Arc<ServerConfig>,
        listener: Option<ListenerId>,
    ) -> Result<Self, rustls::Error> {
        Ok(Self::new(ServerConnection::new(config)?.into(), listener))
    }

    pub fn client(
        config: Arc<ClientConfig>,
        name: ServerName<'static>,
    ) -> Result<Self, rustls::Error> {
        Ok(Self::new(ClientConnection::new(config, name)?.into(), None))
    }

    fn new(mut conn: Connection, listener: Option<ListenerId>) -> Self {
        conn.set_buffer_limit(Some(BUFFER_LIMIT));
        Self {
            conn,
            tracker: RecordTracker::default(),
            listener,
        }
    }

    pub fn is_handshaking(&self) -> bool {
        self.conn.is_handshaking()
    }

    /// Received bytes rustls holds that have not become plaintext yet: the record in progress.
    pub fn buffered(&self) -> usize {
        self.tracker.partial
    }

    /// Take in received bytes; each piece of plaintext they carry goes to `sink` in order.
    pub fn feed(
        &mut self,
        mut data: &[u8],
        sink: &mut dyn FnMut(&[u8]),
    ) -> Result<Fed, TlsFailure> {
        self.tracker.scan(data);
        let mut fed = Fed::default();
        while !data.is_empty() {
            match self.conn.read_tls(&mut data) {
                // close_notify was received: whatever follows is ignored.
                Ok(0) => break,
                Ok(_) => {}
                Err(e) => return Err(TlsFailure(e.to_string())),
            }
            let state = self
                .conn
                .process_new_packets()
                .map_err(|e| TlsFailure(e.to_string()))?;
            if self.drain_plaintext(sink) || state.peer_has_closed() {
                fed.peer_closed = true;
                break;
            }
        }
        if fed.peer_closed {
            self.tracker = RecordTracker::default();
        }
        Ok(fed)
    }

    /// Hand out every decrypted byte; true if the peer has closed the session.
    fn drain_plaintext(&mut self, sink: &mut dyn FnMut(&[u8])) -> bool {
        let mut reader = self.conn.reader();
        loop {
            match reader.fill_buf() {
                Ok([]) => return true,
                Ok(chunk) => {
                    let n = chunk.len();
                    sink(chunk);
                    reader.consume(n);
                }
                // WouldBlock: nothing more for now. UnexpectedEof cannot happen here (rustls
                // never sees a socket EOF; the loop does).
                Err(_) => return false,
            }
        }
    }

    pub fn wants_write(&self) -> bool {
        self.conn.wants_write()
    }

    /// Append every record rustls wants sent (handshake flights, alerts, tickets, data).
    pub fn take_output(&mut self, out: &mut Vec<u8>) {
        while self.conn.wants_write() {
            // Writing into a Vec cannot fail.
            self.conn.write_tls(out).expect("write_tls into a Vec");
        }
    }

    /// Encrypt as much of `pieces` (in order) as rustls takes and append the records to `out`;
    /// returns the plaintext bytes taken. Only after the handshake.
    pub fn encrypt(
        &mut self,
        pieces: &[IoSlice<'_>],
        out: &mut Vec<u8>,
    ) -> Result<usize, TlsFailure> {
        debug_assert!(!self.is_handshaking());
        let total: usize = pieces.iter().map(|p| p.len()).sum();
        let mut taken = 0;
        let mut pieces = pieces;
        let mut offset = 0; // into pieces[0]
        while taken < total {
            let mut slices = Vec::with_capacity(pieces.len());
            slices.push(IoSlice::new(&pieces[0][offset..]));
            slices.extend(pieces[1..].iter().map(|p| IoSlice::new(p)));
            let n = self
                .conn
                .writer()
                .write_vectored(&slices)
                .map_err(|e| TlsFailure(e.to_string()))?;
            self.take_output(out);
            if n == 0 {
                // rustls refused even with an empty outgoing buffer (its record sequence
                // numbers ran out): nothing more can be sent on this connection.
                return Err(TlsFailure("rustls accepts no more data".to_string()));
            }
            taken += n;
            let mut n = n;
            while n > 0 {
                let left = pieces[0].len() - offset;
                if n < left {
                    offset += n;
                    n = 0;
                } else {
                    n -= left;
                    pieces = &pieces[1..];
                    offset = 0;
                }
            }
            while !pieces.is_empty() && pieces[0].len() == offset {
                pieces = &pieces[1..];
                offset = 0;
            }
        }
        Ok(taken)
    }

    /// Queue a close_notify (sent by the next `take_output`).
    pub fn close_notify(&mut self) {
        self.conn.send_close_notify();
    }

    pub fn peer_info(&self) -> Option<TlsPeerInfo> {
        if self.is_handshaking() {
            return None;
        }
        let server_name = match &self.conn {
            Connection::Server(s) => s.server_name().map(str::to_string),
            Connection::Client(_) => None,
        };
        Some(TlsPeerInfo {
            protocol_version: self.conn.protocol_version()?,
            cipher_suite: self.conn.negotiated_cipher_suite()?.suite(),
            peer_certificates: self
                .conn
                .peer_certificates()
                .map(|c| c.to_vec())
                .unwrap_or_default(),
            server_name,
            listener: self.listener,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tracker_counts_only_the_record_in_progress() {
        let mut t = RecordTracker::default();
        // A whole 3-byte record, then 2 bytes of a header.
        t.scan(&[23, 3, 3, 0, 3, 1, 2, 3, 23, 3]);
        assert_eq!(t.partial, 2);
        // The rest of the header (length 300) and 100 body bytes.
        t.scan(&[3, 1, 44]);
        t.scan(&[0; 100]);
        assert_eq!(t.partial, 105);
        t.scan(&[0; 200]);
        assert_eq!(t.partial, 0);
        // Byte by byte.
        for b in [22u8, 3, 1, 0, 2, 9] {
            t.scan(&[b]);
        }
        assert_eq!(t.partial, 6);
        t.scan(&[9]);
        assert_eq!(t.partial, 0);
    }
}
