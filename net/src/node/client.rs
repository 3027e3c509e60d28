//! A small blocking client over `std::net`, for the admin tool and process tests: ApiVersions,
//! DescribeQuorum and Produce, one request at a time.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use bytes::Bytes;
use engine::raft::{DescribeQuorumRequest, DescribeQuorumResponse, Request, Response};

use crate::wire::api;
use crate::wire::client::{
    ApiVersionsRequest, ApiVersionsResponse, ProducePartition, ProduceRequest, ProduceResponse,
    ProduceTopic, PRODUCE, PRODUCE_SPEC,
};
use crate::wire::quorum::{self, METADATA_PARTITION, METADATA_TOPIC};
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
}

/// One connection to one node.
pub struct BlockingClient {
    addr: SocketAddr,
    stream: TcpStream,
    next_correlation: i32,
}

impl BlockingClient {
    pub fn connect(addr: SocketAddr, timeout: Duration) -> Result<Self, ClientError> {
        let io = |source| ClientError::Io { addr, source };
        let stream = TcpStream::connect_timeout(&addr, timeout).map_err(io)?;
        stream.set_read_timeout(Some(timeout)).map_err(io)?;
        stream.set_write_timeout(Some(timeout)).map_err(io)?;
        stream.set_nodelay(true).map_err(io)?;
        Ok(Self {
            addr,
            stream,
            next_correlation: 1,
        })
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

    /// Reads one response frame and checks its correlation id; returns the body reader.
    fn response(&mut self, expected: i32, flexible: bool) -> Result<WireReader, ClientError> {
        let addr = self.addr;
        let io = |source| ClientError::Io { addr, source };
        let mut size = [0u8; 4];
        self.stream.read_exact(&mut size).map_err(io)?;
        let size = i32::from_be_bytes(size).max(0) as usize;
        let mut body = vec![0u8; size];
        self.stream.read_exact(&mut body).map_err(io)?;
        let mut r = WireReader::new(Bytes::from(body));
        let header = ResponseHeader::read(&mut r, flexible).map_err(|e| ClientError::Decode {
            addr,
            message: e.to_string(),
        })?;
        if header.correlation_id != expected {
            return Err(ClientError::Correlation {
                addr,
                got: header.correlation_id,
                expected,
            });
        }
        Ok(r)
    }

    pub fn api_versions(&mut self, version: i16) -> Result<ApiVersionsResponse, ClientError> {
        let corr = self.request(api::API_VERSIONS, version, version >= 3, |w| {
            ApiVersionsRequest::default().encode(w, version)
        })?;
        let mut r = self.response(corr, false)?;
        // An unsupported version is answered with the v0 body.
        let body_version = if (0..=4).contains(&version) {
            version
        } else {
            0
        };
        ApiVersionsResponse::decode(&mut r, body_version).map_err(|e| self.decode_error(e))
    }

    pub fn describe_quorum(&mut self) -> Result<DescribeQuorumResponse, ClientError> {
        let request = Request::DescribeQuorum(DescribeQuorumRequest {});
        let corr = self.request(api::DESCRIBE_QUORUM, 0, true, |w| {
            quorum::encode_request(&request, w)
        })?;
        let mut r = self.response(corr, true)?;
        match quorum::decode_response(api::DESCRIBE_QUORUM, &mut r) {
            Ok(Response::DescribeQuorum(d)) => Ok(d),
            Ok(other) => Err(self.decode_error(format!("unexpected {other:?}"))),
            Err(e) => Err(self.decode_error(e)),
        }
    }

    /// Produces one RecordBatch to `__cluster_metadata`-0. With `acks` 0 no response is read
    /// (Ok(None)).
    pub fn produce(
        &mut self,
        version: i16,
        acks: i16,
        batch: Bytes,
    ) -> Result<Option<ProduceResponse>, ClientError> {
        let request = ProduceRequest {
            transactional_id: None,
            acks,
            timeout_ms: 30_000,
            topics: vec![ProduceTopic {
                name: METADATA_TOPIC.into(),
                partitions: vec![ProducePartition {
                    index: METADATA_PARTITION,
                    records: Some(batch),
                }],
            }],
        };
        let flexible = PRODUCE_SPEC.is_flexible(version);
        let corr = self.request(PRODUCE, version, flexible, |w| request.encode(w, version))?;
        if acks == 0 {
            return Ok(None);
        }
        let mut r = self.response(corr, flexible)?;
        ProduceResponse::decode(&mut r, version)
            .map(Some)
            .map_err(|e| self.decode_error(e))
    }

    fn decode_error(&self, e: impl std::fmt::Display) -> ClientError {
        ClientError::Decode {
            addr: self.addr,
            message: e.to_string(),
        }
    }

    /// True once the peer has closed the connection (a read returns end of file or an error).
    pub fn is_closed_by_peer(&mut self) -> bool {
        let mut buf = [0u8; 64];
        matches!(self.stream.read(&mut buf), Ok(0) | Err(_))
    }
}
