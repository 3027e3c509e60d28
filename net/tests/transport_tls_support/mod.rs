//! Shared by the TLS transport tests (and the transport bench): certificates made in the test
//! with rcgen and written as PEM stores (so the `security::tls` builders read them), and a TLS
//! echo server on its own thread that can swap its listener's config and list its connections.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use net::security::tls::{client_config, server_config, ClientAuth, TlsSettings, TlsVersion};
use net::transport::{Config, ConnId, Event, EventLoop, Stats, TlsPeerInfo};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use rustls::{ClientConfig, ServerConfig};

use crate::transport_support::{eventfd, frame_chain, loopback, write_eventfd, Seen, PATIENCE};

/// A CA that signs leaf certificates, each written as a PEM keystore (key + chain) in `dir`.
pub struct Ca {
    issuer: Issuer<'static, KeyPair>,
    pub name: String,
    /// The CA certificate as a PEM truststore.
    pub truststore: PathBuf,
    dir: PathBuf,
}

fn dn(parts: &[(DnType, &str)]) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    for (ty, value) in parts {
        dn.push(ty.clone(), *value);
    }
    dn
}

impl Ca {
    pub fn new(dir: &Path, name: &str) -> Self {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name = dn(&[
            (DnType::OrganizationName, "Example"),
            (DnType::CommonName, name),
        ]);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let cert = params.self_signed(&key).unwrap();
        let truststore = dir.join(format!("{name}-truststore.pem"));
        std::fs::write(&truststore, cert.pem()).unwrap();
        Self {
            issuer: Issuer::new(params, key),
            name: name.to_string(),
            truststore,
            dir: dir.to_path_buf(),
        }
    }

    /// A leaf for 127.0.0.1 and localhost, usable by servers and clients, subject
    /// `CN=<cn>,OU=ringraft,O=Example`, valid now unless `expired`. Returns the keystore path.
    pub fn leaf(&self, cn: &str, expired: bool) -> PathBuf {
        let key = KeyPair::generate().unwrap();
        let mut params =
            CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
        params.distinguished_name = dn(&[
            (DnType::OrganizationName, "Example"),
            (DnType::OrganizationalUnitName, "ringraft"),
            (DnType::CommonName, cn),
        ]);
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        if expired {
            params.not_before = rcgen::date_time_ymd(2020, 1, 1);
            params.not_after = rcgen::date_time_ymd(2021, 1, 1);
        }
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        let path = self.dir.join(format!("{}-{cn}-keystore.pem", self.name));
        std::fs::write(&path, format!("{}{}", key.serialize_pem(), cert.pem())).unwrap();
        path
    }
}

/// Two CAs and the certificates the tests use, in a temporary directory.
pub struct Pki {
    pub dir: tempfile::TempDir,
    pub ca: Ca,
    pub other_ca: Ca,
    pub server: PathBuf,
    pub client: PathBuf,
    pub expired_client: PathBuf,
    pub foreign_client: PathBuf,
}

impl Pki {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let ca = Ca::new(dir.path(), "ca");
        let other_ca = Ca::new(dir.path(), "other-ca");
        Self {
            server: ca.leaf("server-1", false),
            client: ca.leaf("voter-2", false),
            expired_client: ca.leaf("expired", true),
            foreign_client: other_ca.leaf("intruder", false),
            ca,
            other_ca,
            dir,
        }
    }

    /// A server config: our server certificate, client certificates per `client_auth`.
    pub fn server(&self, client_auth: ClientAuth, protocols: &[TlsVersion]) -> Arc<ServerConfig> {
        server_config(&TlsSettings {
            keystore_location: Some(self.server.clone()),
            truststore_location: Some(self.ca.truststore.clone()),
            client_auth,
            enabled_protocols: protocols.to_vec(),
            cipher_suites: Vec::new(),
        })
        .unwrap()
    }

    /// A client config trusting `ca`, presenting `keystore` if given.
    pub fn client(
        &self,
        ca: &Ca,
        keystore: Option<&Path>,
        protocols: &[TlsVersion],
    ) -> Arc<ClientConfig> {
        client_config(&TlsSettings {
            keystore_location: keystore.map(Path::to_path_buf),
            truststore_location: Some(ca.truststore.clone()),
            client_auth: ClientAuth::None,
            enabled_protocols: protocols.to_vec(),
            cipher_suites: Vec::new(),
        })
        .unwrap()
    }
}

pub fn server_name() -> rustls::pki_types::ServerName<'static> {
    rustls::pki_types::ServerName::try_from("localhost").unwrap()
}

enum Command {
    Reload(Arc<ServerConfig>),
    Peers(mpsc::Sender<Vec<(ConnId, TlsPeerInfo)>>),
}

pub struct TlsServerReport {
    pub stats: Stats,
    pub connections_at_stop: usize,
    pub max_buffered_bytes: usize,
    pub buffered_at_stop: usize,
}

/// An echo server on a TLS listener: every frame comes back on its connection.
pub struct TlsEchoServer {
    pub addr: SocketAddr,
    pub seen: mpsc::Receiver<Seen>,
    stop: OwnedFd,
    control: OwnedFd,
    commands: mpsc::Sender<Command>,
    thread: Option<JoinHandle<TlsServerReport>>,
}

impl TlsEchoServer {
    pub fn start(config: Config, tls: Arc<ServerConfig>) -> Self {
        let stop = eventfd();
        let control = eventfd();
        let (stop_fd, control_fd) = (stop.as_raw_fd(), control.as_raw_fd());
        let (addr_tx, addr_rx) = mpsc::channel();
        let (seen_tx, seen) = mpsc::channel();
        let (commands, command_rx) = mpsc::channel();
        let thread = std::thread::spawn(move || {
            serve(
                config, tls, stop_fd, control_fd, addr_tx, seen_tx, command_rx,
            )
        });
        let addr = addr_rx
            .recv_timeout(PATIENCE)
            .expect("TLS echo server started");
        Self {
            addr,
            seen,
            stop,
            control,
            commands,
            thread: Some(thread),
        }
    }

    pub fn next_seen(&self) -> Seen {
        self.seen
            .recv_timeout(PATIENCE)
            .expect("the TLS echo server reported in time")
    }

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

    /// Swap the listener's config (done before this returns).
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

    pub fn stop(mut self) -> TlsServerReport {
        write_eventfd(&self.stop, 1);
        self.thread
            .take()
            .unwrap()
            .join()
            .expect("TLS echo server thread")
    }
}

impl Drop for TlsEchoServer {
    fn drop(&mut self) {
        if let Some(thread) = self.thread.take() {
            write_eventfd(&self.stop, 1);
            let _ = thread.join();
        }
    }
}

fn serve(
    config: Config,
    tls: Arc<ServerConfig>,
    stop_fd: i32,
    control_fd: i32,
    addr_tx: mpsc::Sender<SocketAddr>,
    seen_tx: mpsc::Sender<Seen>,
    commands: mpsc::Receiver<Command>,
) -> TlsServerReport {
    let mut ring = EventLoop::new(config).expect("server ring");
    let listener = ring.listen_tls(loopback(), tls).expect("listen_tls");
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
                other => panic!("TLS echo server got {other:?}"),
            };
            let _ = seen_tx.send(seen);
        }
    }
    TlsServerReport {
        stats: ring.stats(),
        connections_at_stop: ring.connection_count(),
        max_buffered_bytes: max_buffered,
        buffered_at_stop: ring.buffered_bytes(),
    }
}

/// A blocking rustls client over a std TcpStream, for peers that must not share the test's loop.
pub struct StdTlsClient {
    pub stream: rustls::StreamOwned<rustls::ClientConnection, std::net::TcpStream>,
}

impl StdTlsClient {
    pub fn connect(addr: SocketAddr, config: Arc<ClientConfig>) -> Self {
        let tcp = crate::transport_support::std_client(addr);
        let conn = rustls::ClientConnection::new(config, server_name()).unwrap();
        Self {
            stream: rustls::StreamOwned::new(conn, tcp),
        }
    }

    pub fn round_trip(&mut self, body: &[u8]) -> std::io::Result<Vec<u8>> {
        use std::io::{Read, Write};
        self.stream
            .write_all(&net::wire::frame::size_prefix(body.len()))?;
        self.stream.write_all(body)?;
        self.stream.flush()?;
        let mut prefix = [0u8; 4];
        self.stream.read_exact(&mut prefix)?;
        let mut echoed = vec![0u8; u32::from_be_bytes(prefix) as usize];
        self.stream.read_exact(&mut echoed)?;
        Ok(echoed)
    }
}
