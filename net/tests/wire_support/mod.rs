//! Shared by the wire oracle tests: our encoders' bytes, the `kafka-protocol` crate's bytes
//! (the independent codec every Kafka API is checked against), a decoder of theirs that must
//! consume everything, and the check that a spec's key and header versions are Kafka's.
#![allow(dead_code)]

use bytes::{Bytes, BytesMut};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request};
use net::wire::api::ApiSpec;
use net::wire::WireWriter;

pub fn ours(f: impl FnOnce(&mut WireWriter)) -> Bytes {
    let mut w = WireWriter::new();
    f(&mut w);
    w.into_inner().freeze()
}

/// A response chain joined into one buffer, as the peer receives it.
pub fn joined(chain: &[Bytes]) -> Bytes {
    let mut out = BytesMut::new();
    for piece in chain {
        out.extend_from_slice(piece);
    }
    out.freeze()
}

pub fn theirs<T: Encodable>(msg: &T, version: i16) -> Bytes {
    let mut buf = BytesMut::new();
    msg.encode(&mut buf, version).unwrap();
    buf.freeze()
}

pub fn decode_theirs<T: Decodable>(mut bytes: Bytes, version: i16) -> T {
    let msg = T::decode(&mut bytes, version).unwrap();
    assert!(
        bytes.is_empty(),
        "kafka-protocol left {} bytes",
        bytes.len()
    );
    msg
}

/// Our spec's key is Kafka's, our range lies inside Kafka's (exactly Kafka's when `exact`),
/// and our header versions are Kafka's in every version both know.
pub fn assert_spec_matches<Req: Request, Resp: HeaderVersion>(spec: &ApiSpec, exact: bool) {
    assert_eq!(spec.key, Req::KEY, "{}", spec.name);
    assert!(spec.max_version <= Req::VERSIONS.max, "{}", spec.name);
    if exact {
        assert_eq!(spec.min_version, Req::VERSIONS.min, "{}", spec.name);
        assert_eq!(spec.max_version, Req::VERSIONS.max, "{}", spec.name);
    }
    let low = spec.min_version.max(Req::VERSIONS.min);
    for version in low..=spec.max_version {
        let request_header = if spec.is_flexible(version) { 2 } else { 1 };
        assert_eq!(
            Req::header_version(version),
            request_header,
            "{} v{version}",
            spec.name
        );
        let response_header = i16::from(spec.response_header_flexible(version));
        assert_eq!(
            Resp::header_version(version),
            response_header,
            "{} v{version}",
            spec.name
        );
    }
}
