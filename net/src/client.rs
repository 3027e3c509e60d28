//! A small blocking client over `std::net`, for the admin tool, process tests and the load
//! generator: ApiVersions, DescribeQuorum and Produce, one request at a time, or Produce
//! pipelined (`send_produce` several times, then `recv_produce` for each answer); the consumer
//! APIs (Fetch, ListOffsets, OffsetForLeaderEpoch) and InitProducerId, each at the highest
//! version both sides speak (`call`, negotiated from the server's ApiVersions answer) or at a
//! chosen one (`call_at`; any [`ClientRequest`] goes through these two); SASL authentication
//! (`authenticate`) before them on a SASL listener.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream, ToSocketAddrs};
use std::os::fd::{AsRawFd, FromRawFd};
use std::time::Duration;

use bytes::Bytes;
use engine::raft::{
    AlterQuorumRequest, AlterQuorumResponse, DescribeQuorumRequest, DescribeQuorumResponse,
    ErrorCode, Request, Response,
};

use crate::security::sasl::{Mechanism, SaslClient, SaslError};
use crate::wire::api::ApiSpec;
use crate::wire::kafka::{
    ApiVersionRange, ApiVersionsRequest, ApiVersionsResponse, FetchRequest, FetchResponse,
    InitProducerIdRequest, InitProducerIdResponse, ListOffsetsRequest, ListOffsetsResponse,
    OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, ProduceRequest, ProduceResponse,
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslCodecError, SaslHandshakeRequest,
    SaslHandshakeResponse, API_VERSIONS_SPEC, FETCH_SPEC, INIT_PRODUCER_ID_SPEC, LIST_OFFSETS_SPEC,
    OFFSET_FOR_LEADER_EPOCH_SPEC, PRODUCE, PRODUCE_SPEC, SASL_AUTHENTICATE_SPEC,
    SASL_HANDSHAKE_SPEC,
};
use crate::wire::kafka::{
    DeleteGroupsRequest, DeleteGroupsResponse, DescribeGroupsRequest, DescribeGroupsResponse,
    ListGroupsRequest, ListGroupsResponse, OffsetDeleteRequest, OffsetDeleteResponse,
    DELETE_GROUPS_SPEC, DESCRIBE_GROUPS_SPEC, LIST_GROUPS_SPEC, OFFSET_DELETE_SPEC,
};
use crate::wire::kafka::{
    DescribeClusterRequest, DescribeClusterResponse, MetadataRequest, MetadataRequestTopic,
    MetadataResponse, DESCRIBE_CLUSTER_SPEC, ENDPOINT_TYPE_BROKERS, METADATA_SPEC,
};
use crate::wire::kafka::{
    FindCoordinatorRequest, FindCoordinatorResponse, HeartbeatRequest, HeartbeatResponse,
    JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest, LeaveGroupResponse,
    OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest, OffsetFetchResponse,
    SyncGroupRequest, SyncGroupResponse, FIND_COORDINATOR_SPEC, HEARTBEAT_SPEC, JOIN_GROUP_SPEC,
    LEAVE_GROUP_SPEC, OFFSET_COMMIT_SPEC, OFFSET_FETCH_SPEC, SYNC_GROUP_SPEC,
};
use crate::wire::quorum::{self, METADATA_PARTITION, METADATA_TOPIC};
use crate::wire::WireError;
use crate::wire::{RequestHeader, ResponseHeader, WireReader, WireWriter};

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("{addr}: {source}")]
    Io {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("{addr}: response correlation id {got}, expected {expected}")]
    Correlation {
        addr: SocketAddr,
        got: i32,
        expected: i32,
    },
    #[error("{addr}: undecodable response: {message}")]
    Decode { addr: SocketAddr, message: String },
    /// The server refused a SASL step: its error code and message.
    #[error("{addr}: SASL authentication refused: error {error}: {message}")]
    Authentication {
        addr: SocketAddr,
        error: ErrorCode,
        message: String,
    },
    /// This side's SASL exchange failed: bad input, or a server that does not prove it holds
    /// the credential (SCRAM's server signature).
    #[error("{addr}: SASL: {source}")]
    Sasl { addr: SocketAddr, source: SaslError },
    /// The server does not advertise the API, or none of the versions this client speaks.
    #[error("{addr}: no {api} version in common (server: {server:?}, client: {min}-{max})")]
    NoCommonVersion {
        addr: SocketAddr,
        api: &'static str,
        server: Option<(i16, i16)>,
        min: i16,
        max: i16,
    },
}

/// The first socket address of `host` and `port` (a listener, a voter, a bootstrap server, an
/// address a peer advertises): the lookup's error, or one saying `host` resolves to nothing.
pub fn resolve_host_port(host: &str, port: u16) -> std::io::Result<SocketAddr> {
    (host, port)
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| std::io::Error::other(format!("{host} resolves to nothing")))
}

/// `server` as `--bootstrap-server` lists it (`host:port`, `[v6]:port`) as its first socket
/// address; the error names `server`.
pub fn resolve(server: &str) -> Result<SocketAddr, String> {
    if let Ok(addr) = server.parse() {
        return Ok(addr);
    }
    let (host, port) = server
        .rsplit_once(':')
        .ok_or_else(|| format!("{server}: invalid socket address"))?;
    let port = port
        .parse()
        .map_err(|_| format!("{server}: invalid port value"))?;
    resolve_host_port(host, port).map_err(|e| format!("{server}: {e}"))
}

/// Bytes asked of the socket per read: several pipelined responses arrive in one read.
const READ_CHUNK: usize = 64 * 1024;

/// The socket, or TLS over it.
enum Stream {
    Plain(TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
}

impl Stream {
    fn tcp(&self) -> &TcpStream {
        match self {
            Stream::Plain(s) => s,
            Stream::Tls(s) => s.get_ref(),
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Stream::Plain(s) => s.read(buf),
            Stream::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Stream::Plain(s) => s.write(buf),
            Stream::Tls(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Stream::Plain(s) => s.flush(),
            Stream::Tls(s) => s.flush(),
        }
    }
}

/// A Kafka request this client sends as given: its API's spec (key, versions, header
/// flexibility), its body's encoder and its answer's decoder, so one `call` serves every API.
pub trait ClientRequest {
    type Response;
    type Error: std::fmt::Display;
    const SPEC: &'static ApiSpec;

    fn encode_body(&self, w: &mut WireWriter, version: i16);

    fn decode_answer(r: &mut WireReader, version: i16) -> Result<Self::Response, Self::Error>;
}

/// The requests whose answer is decoded at the version asked: the codecs' own `encode` and
/// `decode`.
macro_rules! client_requests {
    ($($request:ty => $response:ty, $error:ty, $spec:expr;)*) => {$(
        impl ClientRequest for $request {
            type Response = $response;
            type Error = $error;
            const SPEC: &'static ApiSpec = &$spec;

            fn encode_body(&self, w: &mut WireWriter, version: i16) {
                self.encode(w, version)
            }

            fn decode_answer(r: &mut WireReader, version: i16) -> Result<$response, $error> {
                <$response>::decode(r, version)
            }
        }
    )*};
}

client_requests! {
    FetchRequest => FetchResponse, WireError, FETCH_SPEC;
    ListOffsetsRequest => ListOffsetsResponse, WireError, LIST_OFFSETS_SPEC;
    OffsetForLeaderEpochRequest => OffsetForLeaderEpochResponse, WireError,
        OFFSET_FOR_LEADER_EPOCH_SPEC;
    InitProducerIdRequest => InitProducerIdResponse, WireError, INIT_PRODUCER_ID_SPEC;
    MetadataRequest => MetadataResponse, WireError, METADATA_SPEC;
    DescribeClusterRequest => DescribeClusterResponse, WireError, DESCRIBE_CLUSTER_SPEC;
    SaslHandshakeRequest => SaslHandshakeResponse, SaslCodecError, SASL_HANDSHAKE_SPEC;
    SaslAuthenticateRequest => SaslAuthenticateResponse, SaslCodecError, SASL_AUTHENTICATE_SPEC;
    FindCoordinatorRequest => FindCoordinatorResponse, WireError, FIND_COORDINATOR_SPEC;
    JoinGroupRequest => JoinGroupResponse, WireError, JOIN_GROUP_SPEC;
    SyncGroupRequest => SyncGroupResponse, WireError, SYNC_GROUP_SPEC;
    HeartbeatRequest => HeartbeatResponse, WireError, HEARTBEAT_SPEC;
    LeaveGroupRequest => LeaveGroupResponse, WireError, LEAVE_GROUP_SPEC;
    OffsetCommitRequest => OffsetCommitResponse, WireError, OFFSET_COMMIT_SPEC;
    OffsetFetchRequest => OffsetFetchResponse, WireError, OFFSET_FETCH_SPEC;
    ListGroupsRequest => ListGroupsResponse, WireError, LIST_GROUPS_SPEC;
    DescribeGroupsRequest => DescribeGroupsResponse, WireError, DESCRIBE_GROUPS_SPEC;
    DeleteGroupsRequest => DeleteGroupsResponse, WireError, DELETE_GROUPS_SPEC;
    OffsetDeleteRequest => OffsetDeleteResponse, WireError, OFFSET_DELETE_SPEC;
}

impl ClientRequest for ApiVersionsRequest {
    type Response = ApiVersionsResponse;
    type Error = WireError;
    const SPEC: &'static ApiSpec = &API_VERSIONS_SPEC;

    fn encode_body(&self, w: &mut WireWriter, version: i16) {
        self.encode(w, version)
    }

    /// A version the server does not speak is answered with the v0 body.
    fn decode_answer(r: &mut WireReader, version: i16) -> Result<ApiVersionsResponse, WireError> {
        let body_version = if API_VERSIONS_SPEC.supports(version) {
            version
        } else {
            0
        };
        ApiVersionsResponse::decode(r, body_version)
    }
}

/// One connection to one node.
pub struct BlockingClient {
    addr: SocketAddr,
    stream: Stream,
    next_correlation: i32,
    /// Bytes read from the socket and not yet consumed as frames: `received[consumed..]`.
    received: Vec<u8>,
    consumed: usize,
    /// The server's ApiVersions answer, asked the first time a version is negotiated.
    server_versions: Option<Vec<ApiVersionRange>>,
}

/// A TCP connection to `addr` from the local address `local` (bound before connecting): a
/// test reaches a node from several addresses of this machine's loopback (any 127.x.y.z on
/// Linux), as from several hosts. IPv4 only; blocks until connected.
pub fn tcp_connect_from(local: Ipv4Addr, addr: SocketAddr) -> std::io::Result<TcpStream> {
    let SocketAddr::V4(remote) = addr else {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{addr}: IPv4 only"),
        ));
    };
    let sockaddr = |ip: Ipv4Addr, port: u16| libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(ip).to_be(),
        },
        sin_zero: [0; 8],
    };
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    let check = |result: libc::c_int| match result {
        0.. => Ok(result),
        _ => Err(std::io::Error::last_os_error()),
    };
    // SAFETY: a new socket, owned by the TcpStream at once (closed on every error below); the
    // addresses are valid sockaddr_in values of the length given.
    unsafe {
        let fd = check(libc::socket(
            libc::AF_INET,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0,
        ))?;
        let stream = TcpStream::from_raw_fd(fd);
        let here = sockaddr(local, 0);
        check(libc::bind(
            fd,
            (&here as *const libc::sockaddr_in).cast(),
            len,
        ))?;
        let there = sockaddr(*remote.ip(), remote.port());
        check(libc::connect(
            fd,
            (&there as *const libc::sockaddr_in).cast(),
            len,
        ))?;
        Ok(stream)
    }
}

impl AsRawFd for BlockingClient {
    /// The TCP socket's descriptor (under TLS too), for waiting on many clients at once; bytes
    /// read through it directly would be lost to the client.
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.stream.tcp().as_raw_fd()
    }
}

/// Waits up to `timeout` for any of `fds` to become readable (POLLIN, or an error or hang-up
/// the next read reports); true when one did, false on timeout or a signal. ppoll, not poll:
/// the load generator waits for sub-millisecond send times.
pub fn ppoll_readable(fds: &mut [libc::pollfd], timeout: Duration) -> std::io::Result<bool> {
    let wait = libc::timespec {
        tv_sec: timeout.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `fds` is a valid slice of pollfds, its length given with it; a valid timespec;
    // no sigmask.
    let ready = unsafe {
        libc::ppoll(
            fds.as_mut_ptr(),
            fds.len() as libc::nfds_t,
            &wait,
            std::ptr::null(),
        )
    };
    if ready < 0 {
        let error = std::io::Error::last_os_error();
        if error.kind() == std::io::ErrorKind::Interrupted {
            return Ok(false);
        }
        return Err(error);
    }
    Ok(ready > 0)
}

impl BlockingClient {
    pub fn connect(addr: SocketAddr, timeout: Duration) -> Result<Self, ClientError> {
        let stream = TcpStream::connect_timeout(&addr, timeout)
            .map_err(|source| ClientError::Io { addr, source })?;
        Self::over(stream, addr, timeout)
    }

    /// A connection from the local address `local` ([`tcp_connect_from`]).
    pub fn connect_from(
        local: Ipv4Addr,
        addr: SocketAddr,
        timeout: Duration,
    ) -> Result<Self, ClientError> {
        let stream =
            tcp_connect_from(local, addr).map_err(|source| ClientError::Io { addr, source })?;
        Self::over(stream, addr, timeout)
    }

    fn over(stream: TcpStream, addr: SocketAddr, timeout: Duration) -> Result<Self, ClientError> {
        let io = |source| ClientError::Io { addr, source };
        stream.set_read_timeout(Some(timeout)).map_err(io)?;
        stream.set_write_timeout(Some(timeout)).map_err(io)?;
        stream.set_nodelay(true).map_err(io)?;
        Ok(Self {
            addr,
            stream: Stream::Plain(stream),
            next_correlation: 1,
            received: Vec::new(),
            consumed: 0,
            server_versions: None,
        })
    }

    /// A connection over TLS: the server's certificate checked by `config` and against
    /// `server_name`, this side's certificate presented if `config` has one. The handshake
    /// completes here; under TLS 1.3 a client certificate the server refuses shows only at the
    /// first read (the server's alert).
    pub fn connect_tls(
        addr: SocketAddr,
        timeout: Duration,
        config: std::sync::Arc<rustls::ClientConfig>,
        server_name: &str,
    ) -> Result<Self, ClientError> {
        let io = |source| ClientError::Io { addr, source };
        let mut client = Self::connect(addr, timeout)?;
        let Stream::Plain(tcp) = client.stream else {
            unreachable!("connect opens a plain stream")
        };
        let name = rustls::pki_types::ServerName::try_from(server_name.to_owned())
            .map_err(|e| io(std::io::Error::other(format!("{server_name}: {e}"))))?;
        let conn = rustls::ClientConnection::new(config, name)
            .map_err(|e| io(std::io::Error::other(e)))?;
        let mut tls = rustls::StreamOwned::new(conn, tcp);
        while tls.conn.is_handshaking() {
            tls.conn
                .complete_io(&mut tls.sock)
                .map_err(|e| io(std::io::Error::other(format!("TLS handshake: {e}"))))?;
        }
        client.stream = Stream::Tls(Box::new(tls));
        Ok(client)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Sends one request; `body` writes the body after the header.
    fn request(
        &mut self,
        api_key: i16,
        version: i16,
        flexible: bool,
        body: impl FnOnce(&mut WireWriter),
    ) -> Result<i32, ClientError> {
        let correlation_id = self.next_correlation;
        self.next_correlation += 1;
        let mut w = WireWriter::with_capacity(256);
        w.i32(0);
        RequestHeader {
            api_key,
            api_version: version,
            correlation_id,
            client_id: Some("ringraft-client".into()),
        }
        .write(&mut w, flexible);
        body(&mut w);
        let mut frame = w.into_inner();
        let size = (frame.len() - 4) as i32;
        frame[..4].copy_from_slice(&size.to_be_bytes());
        self.write_raw(&frame)?;
        Ok(correlation_id)
    }

    /// Writes raw bytes (tests use it to send garbage).
    pub fn write_raw(&mut self, bytes: &[u8]) -> Result<(), ClientError> {
        let addr = self.addr;
        self.stream
            .write_all(bytes)
            .map_err(|source| ClientError::Io { addr, source })
    }

    /// Reads the next size-prefixed frame and returns its body as is, header and all (tests use
    /// it for the SASL legacy framing, whose answers are raw tokens).
    pub fn read_raw_frame(&mut self) -> Result<Bytes, ClientError> {
        self.read_frame()
    }

    /// Reads one response frame and checks its correlation id; returns the body reader.
    fn response(&mut self, expected: i32, flexible: bool) -> Result<WireReader, ClientError> {
        let (correlation_id, r) = self.any_response(flexible)?;
        if correlation_id != expected {
            return Err(ClientError::Correlation {
                addr: self.addr,
                got: correlation_id,
                expected,
            });
        }
        Ok(r)
    }

    /// Reads the next response frame, whatever its correlation id.
    fn any_response(&mut self, flexible: bool) -> Result<(i32, WireReader), ClientError> {
        let body = self.read_frame()?;
        let mut r = WireReader::new(body);
        let header = ResponseHeader::read(&mut r, flexible).map_err(|e| self.decode_error(e))?;
        Ok((header.correlation_id, r))
    }

    /// One size-prefixed frame's body, from the bytes already read or the socket.
    fn read_frame(&mut self) -> Result<Bytes, ClientError> {
        self.fill_to(4)?;
        let at = self.consumed;
        let size = i32::from_be_bytes(self.received[at..at + 4].try_into().expect("4 bytes"));
        let size = size.max(0) as usize;
        self.fill_to(4 + size)?;
        let body = Bytes::copy_from_slice(&self.received[at + 4..at + 4 + size]);
        self.consumed += 4 + size;
        Ok(body)
    }

    /// Reads until at least `wanted` unconsumed bytes are held.
    fn fill_to(&mut self, wanted: usize) -> Result<(), ClientError> {
        if self.consumed == self.received.len() {
            self.received.clear();
            self.consumed = 0;
        }
        while self.received.len() - self.consumed < wanted {
            if self.consumed > 0 {
                self.received.drain(..self.consumed);
                self.consumed = 0;
            }
            let held = self.received.len();
            // Only what is missing (at least a chunk): growing by `wanted` on every read
            // zero-filled a whole large frame's size per socket read of it.
            let missing = wanted - (held - self.consumed);
            self.received.resize(held + READ_CHUNK.max(missing), 0);
            let read = self.stream.read(&mut self.received[held..]);
            let addr = self.addr;
            match read {
                Ok(0) => {
                    self.received.truncate(held);
                    return Err(ClientError::Io {
                        addr,
                        source: std::io::ErrorKind::UnexpectedEof.into(),
                    });
                }
                Ok(n) => self.received.truncate(held + n),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {
                    self.received.truncate(held)
                }
                Err(source) => {
                    self.received.truncate(held);
                    return Err(ClientError::Io { addr, source });
                }
            }
        }
        Ok(())
    }

    /// True when a whole response frame is already held: reading it takes no socket read.
    pub fn holds_frame(&self) -> bool {
        let held = &self.received[self.consumed..];
        if held.len() < 4 {
            return false;
        }
        let size = i32::from_be_bytes(held[..4].try_into().expect("4 bytes")).max(0);
        held.len() >= 4 + size as usize
    }

    /// True when a response can be read without blocking long: a whole frame is already held,
    /// or the socket becomes readable within `timeout` (then the rest of a frame may still be
    /// on its way).
    pub fn wait_readable(&mut self, timeout: Duration) -> Result<bool, ClientError> {
        if self.holds_frame() {
            return Ok(true);
        }
        let mut poll = [libc::pollfd {
            fd: self.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }];
        ppoll_readable(&mut poll, timeout).map_err(|source| ClientError::Io {
            addr: self.addr,
            source,
        })
    }

    pub fn api_versions(&mut self, version: i16) -> Result<ApiVersionsResponse, ClientError> {
        self.call_at(version, &ApiVersionsRequest::default())
    }

    pub fn describe_quorum(&mut self) -> Result<DescribeQuorumResponse, ClientError> {
        match self.quorum_call(Request::DescribeQuorum(DescribeQuorumRequest {}), None)? {
            Response::DescribeQuorum(d) => Ok(d),
            other => Err(self.decode_error(format!("unexpected {other:?}"))),
        }
    }

    /// AlterQuorum (flexible v0). The leader answers once the target is recorded and
    /// committed, or at the request's TimeoutMs: the read waits that long and a second more.
    pub fn alter_quorum(
        &mut self,
        request: AlterQuorumRequest,
    ) -> Result<AlterQuorumResponse, ClientError> {
        let wait = Duration::from_millis(u64::try_from(request.timeout_ms).unwrap_or(0))
            + Duration::from_secs(1);
        match self.quorum_call(Request::AlterQuorum(request), Some(wait))? {
            Response::AlterQuorum(a) => Ok(a),
            other => Err(self.decode_error(format!("unexpected {other:?}"))),
        }
    }

    /// One quorum RPC (flexible v0) and its decoded response; with `wait`, the read waits at
    /// least that long for it (the connection's own read timeout is put back after).
    fn quorum_call(
        &mut self,
        request: Request,
        wait: Option<Duration>,
    ) -> Result<Response, ClientError> {
        let key = request.api_key();
        let corr = self.request(key, 0, true, |w| quorum::encode_request(&request, w))?;
        let answer = match wait {
            None => self.response(corr, true),
            Some(wait) => {
                let addr = self.addr;
                let io = |source| ClientError::Io { addr, source };
                let before = self.stream.tcp().read_timeout().map_err(io)?;
                self.stream
                    .tcp()
                    .set_read_timeout(Some(before.map_or(wait, |b| b.max(wait))))
                    .map_err(io)?;
                let answer = self.response(corr, true);
                self.stream.tcp().set_read_timeout(before).map_err(io)?;
                answer
            }
        };
        let mut r = answer?;
        quorum::decode_response(key, &mut r).map_err(|e| self.decode_error(e))
    }

    /// Metadata at `version` (0-12) for `topics` (None: every topic).
    pub fn metadata(
        &mut self,
        version: i16,
        topics: Option<&[&str]>,
    ) -> Result<MetadataResponse, ClientError> {
        let request = MetadataRequest {
            topics: topics.map(|names| {
                names
                    .iter()
                    .map(|name| MetadataRequestTopic {
                        topic_id: [0; 16],
                        name: Some((*name).to_owned()),
                    })
                    .collect()
            }),
            allow_auto_topic_creation: version < 4,
            ..MetadataRequest::default()
        };
        self.call_at(version, &request)
    }

    /// DescribeCluster at `version` (0-1), with the cluster's authorized operations.
    pub fn describe_cluster(
        &mut self,
        version: i16,
    ) -> Result<DescribeClusterResponse, ClientError> {
        let request = DescribeClusterRequest {
            include_cluster_authorized_operations: true,
            endpoint_type: ENDPOINT_TYPE_BROKERS,
        };
        self.call_at(version, &request)
    }

    /// Produces one RecordBatch to `__cluster_metadata`-0 at `version` (any of 0-10: v0-v2
    /// requests are sent in their own layout, to see the server refuse them). With `acks` 0 no
    /// response is read (Ok(None)).
    pub fn produce(
        &mut self,
        version: i16,
        acks: i16,
        batch: Bytes,
    ) -> Result<Option<ProduceResponse>, ClientError> {
        let corr = self.send_produce(version, acks, batch)?;
        if acks == 0 {
            return Ok(None);
        }
        let (got, response) = self.recv_produce(version)?;
        if got != corr {
            return Err(ClientError::Correlation {
                addr: self.addr,
                got,
                expected: corr,
            });
        }
        Ok(Some(response))
    }

    /// Sends one Produce of `batch` to `__cluster_metadata`-0 without waiting for its answer;
    /// returns its correlation id. Answers (none with acks 0) come from [`Self::recv_produce`];
    /// a node may answer a refused request before earlier accepted ones, so match them by id.
    pub fn send_produce(
        &mut self,
        version: i16,
        acks: i16,
        batch: Bytes,
    ) -> Result<i32, ClientError> {
        let request = ProduceRequest::one_batch(METADATA_TOPIC, METADATA_PARTITION, acks, batch);
        let flexible = PRODUCE_SPEC.is_flexible(version);
        self.request(PRODUCE, version, flexible, |w| request.encode(w, version))
    }

    /// Reads the next Produce answer on this connection (sent with `version`): its correlation
    /// id and body. Blocks up to the connect timeout.
    pub fn recv_produce(&mut self, version: i16) -> Result<(i32, ProduceResponse), ClientError> {
        let flexible = PRODUCE_SPEC.response_header_flexible(version);
        let (correlation_id, mut r) = self.any_response(flexible)?;
        let response =
            ProduceResponse::decode(&mut r, version).map_err(|e| self.decode_error(e))?;
        Ok((correlation_id, response))
    }

    /// The highest version of `spec` the server advertises and this client speaks. The
    /// server's ranges are asked once per connection (ApiVersions v3) and kept.
    pub fn negotiate(&mut self, spec: &ApiSpec) -> Result<i16, ClientError> {
        if self.server_versions.is_none() {
            let answer = self.api_versions(3)?;
            if answer.error != ErrorCode::NONE {
                return Err(self.decode_error(format!("ApiVersions answered {}", answer.error)));
            }
            self.server_versions = Some(answer.api_keys);
        }
        let server = self
            .server_versions
            .iter()
            .flatten()
            .find(|range| range.api_key == spec.key)
            .map(|range| (range.min_version, range.max_version));
        let common = server.and_then(|(min, max)| {
            let (low, high) = (min.max(spec.min_version), max.min(spec.max_version));
            (low <= high).then_some(high)
        });
        common.ok_or(ClientError::NoCommonVersion {
            addr: self.addr,
            api: spec.name,
            server,
            min: spec.min_version,
            max: spec.max_version,
        })
    }

    /// `request` at the highest version of its API both sides speak, and its decoded answer.
    pub fn call<R: ClientRequest>(&mut self, request: &R) -> Result<R::Response, ClientError> {
        let version = self.negotiate(R::SPEC)?;
        self.call_at(version, request)
    }

    /// `request` at `version` (the fields it lacks are not sent) and its decoded answer, with
    /// the header versions its API's spec gives.
    pub fn call_at<R: ClientRequest>(
        &mut self,
        version: i16,
        request: &R,
    ) -> Result<R::Response, ClientError> {
        let spec = R::SPEC;
        let corr = self.request(spec.key, version, spec.is_flexible(version), |w| {
            request.encode_body(w, version)
        })?;
        let mut r = self.response(corr, spec.response_header_flexible(version))?;
        R::decode_answer(&mut r, version).map_err(|e| self.decode_error(e))
    }

    /// Produces `batch` at the negotiated Produce version; returns that version with the
    /// answer (None with acks 0). `produce` sends at a chosen one, v0-v2 included (their
    /// answer is the server's refusal).
    pub fn produce_negotiated(
        &mut self,
        acks: i16,
        batch: Bytes,
    ) -> Result<(i16, Option<ProduceResponse>), ClientError> {
        let version = self.negotiate(&PRODUCE_SPEC)?;
        Ok((version, self.produce(version, acks, batch)?))
    }

    /// SaslHandshake (v0 or v1) naming `mechanism`: the server's answer, whatever its error.
    pub fn sasl_handshake(
        &mut self,
        version: i16,
        mechanism: &str,
    ) -> Result<SaslHandshakeResponse, ClientError> {
        let request = SaslHandshakeRequest {
            mechanism: mechanism.into(),
        };
        self.call_at(version, &request)
    }

    /// One SaslAuthenticate (v0-2) carrying `token`: the server's answer, whatever its error.
    pub fn sasl_authenticate(
        &mut self,
        version: i16,
        token: &[u8],
    ) -> Result<SaslAuthenticateResponse, ClientError> {
        let request = SaslAuthenticateRequest {
            auth_bytes: Bytes::copy_from_slice(token),
        };
        self.call_at(version, &request)
    }

    /// Authenticates this connection as `user` with `mechanism` (SaslHandshake v1, then
    /// SaslAuthenticate v1 until the exchange is done). For SCRAM the server's signature is
    /// checked: Ok means the server holds the user's credential too. A refusal is
    /// [`ClientError::Authentication`] with the server's error code; the server then closes
    /// the connection.
    pub fn authenticate(
        &mut self,
        mechanism: Mechanism,
        user: &str,
        password: &str,
    ) -> Result<(), ClientError> {
        let addr = self.addr;
        let sasl = |source| ClientError::Sasl { addr, source };
        let mut client = SaslClient::new(mechanism, user, password).map_err(sasl)?;
        let handshake = self.sasl_handshake(1, mechanism.name())?;
        if handshake.error != ErrorCode::NONE {
            return Err(ClientError::Authentication {
                addr,
                error: handshake.error,
                message: format!(
                    "SaslHandshake: {mechanism} is not enabled (enabled: {})",
                    handshake.mechanisms.join(", ")
                ),
            });
        }
        let mut token = client.first_message();
        // One SaslAuthenticate per client token; a server that asks for more is refused.
        for _ in 0..mechanism.steps() {
            let response = self.sasl_authenticate(1, &token)?;
            if response.error != ErrorCode::NONE {
                return Err(ClientError::Authentication {
                    addr,
                    error: response.error,
                    message: response.error_message.unwrap_or_default(),
                });
            }
            match client.step(&response.auth_bytes).map_err(sasl)? {
                Some(next) => token = next,
                None => return Ok(()),
            }
        }
        Err(sasl(SaslError::IllegalState))
    }

    fn decode_error(&self, e: impl std::fmt::Display) -> ClientError {
        ClientError::Decode {
            addr: self.addr,
            message: e.to_string(),
        }
    }

    /// Drops the bytes already consumed and frees the read buffer's spare capacity (a read
    /// grows it by a 64 KiB chunk): a client kept open and idle, as the load generator's
    /// `--idle-connections` keeps thousands, then holds only what it has not read yet.
    pub fn shrink_buffers(&mut self) {
        self.received.drain(..self.consumed);
        self.consumed = 0;
        self.received.shrink_to_fit();
    }

    /// Whether the peer has closed the connection, looked at without blocking for long: false
    /// while the socket has nothing to read; else one read of at most `timeout` decides (end of
    /// file, or an error other than the timeout: closed). For a connection that expects no
    /// response (the load generator's idle ones): bytes read are dropped.
    pub fn closed_by_peer_now(&mut self, timeout: Duration) -> bool {
        match self.wait_readable(Duration::ZERO) {
            Ok(false) => return false,
            Ok(true) => {}
            Err(_) => return true,
        }
        let previous = self.stream.tcp().read_timeout().ok().flatten();
        let short = Some(timeout.max(Duration::from_millis(1)));
        if self.stream.tcp().set_read_timeout(short).is_err() {
            return true;
        }
        let mut buf = [0u8; 256];
        let closed = match self.stream.read(&mut buf) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => !matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock
                    | std::io::ErrorKind::TimedOut
                    | std::io::ErrorKind::Interrupted
            ),
        };
        let _ = self.stream.tcp().set_read_timeout(previous);
        closed
    }

    /// True once the peer has closed the connection (a read returns end of file or an error).
    /// Reads the socket directly: call it only when no response is expected.
    pub fn is_closed_by_peer(&mut self) -> bool {
        let mut buf = [0u8; 64];
        matches!(self.stream.read(&mut buf), Ok(0) | Err(_))
    }
}

#[cfg(test)]
mod resolve_tests {
    use super::*;

    #[test]
    fn host_port_forms_resolve_and_bad_ones_name_the_server() {
        assert_eq!(
            resolve("127.0.0.1:9092").unwrap().to_string(),
            "127.0.0.1:9092"
        );
        assert_eq!(resolve("[::1]:9092").unwrap().to_string(), "[::1]:9092");
        assert_eq!(resolve("localhost:9092").unwrap().port(), 9092);
        assert_eq!(
            resolve("localhost").unwrap_err(),
            "localhost: invalid socket address"
        );
        assert_eq!(
            resolve("localhost:http").unwrap_err(),
            "localhost:http: invalid port value"
        );
        assert_eq!(resolve_host_port("::1", 7).unwrap().to_string(), "[::1]:7");
    }
}

#[cfg(test)]
mod negotiation_tests {
    use std::net::TcpListener;

    use super::*;
    use crate::wire::api;
    use crate::wire::kafka::{
        FetchPartitionData, FetchTopic, FetchableTopic, ListOffsetsPartition,
        ListOffsetsPartitionResponse, ListOffsetsTopic, ListOffsetsTopicResponse,
        API_VERSIONS_SPEC,
    };

    const TIMEOUT: Duration = Duration::from_secs(10);

    /// A one-connection server: each request's header and body go to `answer`, whose body
    /// (None: no answer, end) is framed with the spec's response header.
    fn serve(
        mut answer: impl FnMut(RequestHeader, WireReader) -> Option<(&'static ApiSpec, Bytes)>
            + Send
            + 'static,
    ) -> (SocketAddr, std::thread::JoinHandle<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (mut socket, _) = listener.accept().unwrap();
            socket.set_read_timeout(Some(TIMEOUT)).unwrap();
            for _ in 0..8 {
                let mut size = [0u8; 4];
                if socket.read_exact(&mut size).is_err() {
                    return;
                }
                let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
                socket.read_exact(&mut body).unwrap();
                let mut r = WireReader::new(Bytes::from(body));
                let prefix = crate::wire::RequestPrefix::read(&mut r).unwrap();
                let spec = [
                    API_VERSIONS_SPEC,
                    FETCH_SPEC,
                    LIST_OFFSETS_SPEC,
                    PRODUCE_SPEC,
                ]
                .into_iter()
                .find(|spec| spec.key == prefix.api_key)
                .expect("an API this test serves");
                let flexible = spec.is_flexible(prefix.api_version);
                let header = RequestHeader::read_rest(&mut r, prefix, flexible).unwrap();
                let correlation_id = header.correlation_id;
                let version = header.api_version;
                let Some((spec, body)) = answer(header, r) else {
                    return;
                };
                let mut w = WireWriter::new();
                w.i32(0);
                ResponseHeader { correlation_id }
                    .write(&mut w, spec.response_header_flexible(version));
                let mut frame = w.into_inner();
                frame.extend_from_slice(&body);
                let size = (frame.len() - 4) as i32;
                frame[..4].copy_from_slice(&size.to_be_bytes());
                socket.write_all(&frame).unwrap();
            }
        });
        (addr, server)
    }

    /// The server lists Fetch 4-11 and ListOffsets 1-5 (older than this client): each call
    /// goes out at the highest common version, ApiVersions is asked once, and an API the
    /// server does not list fails without a request.
    #[test]
    fn calls_use_the_highest_version_both_sides_speak() {
        let mut seen = Vec::new();
        let (addr, server) = serve(move |header, mut r| {
            seen.push((header.api_key, header.api_version));
            match header.api_key {
                api::API_VERSIONS => {
                    let ranges = [(1, 4, 11), (2, 1, 5), (0, 0, 10)];
                    let response = ApiVersionsResponse {
                        error: ErrorCode::NONE,
                        api_keys: ranges
                            .map(|(api_key, min_version, max_version)| ApiVersionRange {
                                api_key,
                                min_version,
                                max_version,
                            })
                            .to_vec(),
                        throttle_time_ms: 0,
                    };
                    let v = header.api_version;
                    Some((
                        &API_VERSIONS_SPEC,
                        WireWriter::bytes_of(|w| response.encode(w, v)),
                    ))
                }
                1 => {
                    assert_eq!(seen, vec![(18, 3), (1, 11)]);
                    let request = FetchRequest::decode(&mut r, 11).unwrap();
                    assert_eq!(request.rack_id, "rack-a");
                    assert_eq!(request.topics[0].partitions[0].fetch_offset, 5);
                    let response = FetchResponse {
                        throttle_time_ms: 0,
                        error: ErrorCode::NONE,
                        session_id: 0,
                        topics: vec![FetchableTopic {
                            name: METADATA_TOPIC.into(),
                            partitions: vec![FetchPartitionData {
                                high_watermark: 9,
                                records: Some(vec![Bytes::from_static(b"batch")]),
                                ..FetchPartitionData::empty(0, ErrorCode::NONE)
                            }],
                        }],
                    };
                    let chain = response.encode_chain(WireWriter::new(), 11);
                    Some((&FETCH_SPEC, crate::wire::frame::joined(&chain)))
                }
                2 => {
                    assert_eq!(header.api_version, 5);
                    let request = ListOffsetsRequest::decode(&mut r, 5).unwrap();
                    let response = ListOffsetsResponse {
                        throttle_time_ms: 0,
                        topics: vec![ListOffsetsTopicResponse {
                            name: request.topics[0].name.clone(),
                            partitions: vec![ListOffsetsPartitionResponse {
                                index: 0,
                                error: ErrorCode::NONE,
                                timestamp: -1,
                                offset: 9,
                                leader_epoch: 3,
                            }],
                        }],
                    };
                    Some((
                        &LIST_OFFSETS_SPEC,
                        WireWriter::bytes_of(|w| response.encode(w, 5)),
                    ))
                }
                _ => None,
            }
        });
        let mut client = BlockingClient::connect(addr, TIMEOUT).unwrap();
        let request = FetchRequest {
            rack_id: "rack-a".into(),
            topics: vec![FetchTopic {
                name: METADATA_TOPIC.into(),
                partitions: vec![crate::wire::kafka::FetchPartition {
                    partition: 0,
                    current_leader_epoch: 3,
                    fetch_offset: 5,
                    last_fetched_epoch: -1,
                    log_start_offset: -1,
                    partition_max_bytes: 1 << 20,
                }],
            }],
            ..FetchRequest::default()
        };
        let fetched = client.call(&request).unwrap();
        let partition = &fetched.topics[0].partitions[0];
        assert_eq!(partition.high_watermark, 9);
        assert_eq!(&partition.records_bytes().unwrap()[..], b"batch");

        let offsets = client
            .call(&ListOffsetsRequest {
                replica_id: -1,
                isolation_level: 1,
                topics: vec![ListOffsetsTopic {
                    name: METADATA_TOPIC.into(),
                    partitions: vec![ListOffsetsPartition {
                        index: 0,
                        current_leader_epoch: 3,
                        timestamp: -1,
                    }],
                }],
            })
            .unwrap();
        assert_eq!(offsets.topics[0].partitions[0].offset, 9);
        assert_eq!(offsets.topics[0].partitions[0].leader_epoch, 3);

        let refused = client.call(&InitProducerIdRequest {
            transactional_id: None,
            transaction_timeout_ms: 60_000,
            producer_id: -1,
            producer_epoch: -1,
        });
        assert!(matches!(
            refused,
            Err(ClientError::NoCommonVersion {
                server: None,
                api: "InitProducerId",
                ..
            })
        ));
        assert_eq!(client.negotiate(&PRODUCE_SPEC).unwrap(), 10);
        drop(client);
        server.join().unwrap();
    }

    /// A v2 Produce goes out in the v0-2 layout and the v2 refusal is read back.
    #[test]
    fn produce_at_v2_reads_the_refusal() {
        let (addr, server) = serve(|header, mut r| {
            assert_eq!((header.api_key, header.api_version), (PRODUCE, 2));
            let legacy = crate::wire::kafka::LegacyProduceRequest::decode(&mut r, 2).unwrap();
            let refusal = legacy.refusal();
            Some((
                &PRODUCE_SPEC,
                WireWriter::bytes_of(|w| refusal.encode(w, 2)),
            ))
        });
        let mut client = BlockingClient::connect(addr, TIMEOUT).unwrap();
        let response = client
            .produce(2, -1, Bytes::from_static(b"message set"))
            .unwrap()
            .unwrap();
        let partition = &response.topics[0].partitions[0];
        assert_eq!(partition.index, METADATA_PARTITION);
        assert_eq!(partition.error, ErrorCode::UNSUPPORTED_VERSION);
        drop(client);
        server.join().unwrap();
    }
}

#[cfg(test)]
mod idle_tests {
    use std::net::TcpListener;

    use super::*;

    /// An idle connection reads as open, bytes arriving on it too, and a peer's close as closed,
    /// each without waiting for the client's 10 s read timeout.
    #[test]
    fn closed_by_peer_now_tells_an_open_idle_connection_from_a_closed_one() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let mut client = BlockingClient::connect(addr, Duration::from_secs(10)).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        let started = std::time::Instant::now();
        assert!(!client.closed_by_peer_now(Duration::from_millis(10)));
        client.shrink_buffers();
        server.write_all(b"unexpected").unwrap();
        while !client.wait_readable(Duration::from_millis(10)).unwrap() {
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "bytes never arrived"
            );
        }
        assert!(!client.closed_by_peer_now(Duration::from_millis(10)));
        drop(server);
        while !client.closed_by_peer_now(Duration::from_millis(10)) {
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "close never seen"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}
