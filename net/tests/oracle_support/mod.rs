//! What the oracle tests share: our encoder's bytes, `kafka-protocol`'s bytes and decoder, and
//! the check that our spec's key, version range and header versions are Kafka's.

#![allow(dead_code)] // each test binary uses some

use bytes::{Bytes, BytesMut};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request};
use net::wire::api::ApiSpec;
use net::wire::WireWriter;

pub fn ours(f: impl FnOnce(&mut WireWriter)) -> Bytes {
    let mut w = WireWriter::new();
    f(&mut w);
    w.into_inner().freeze()
}

pub fn theirs<T: Encodable>(msg: &T, version: i16) -> Bytes {
    let mut buf = BytesMut::new();
    msg.encode(&mut buf, version).unwrap();
    buf.freeze()
}

/// `kafka-protocol`'s decoding of `bytes`, which must consume them all.
pub fn decode_theirs<T: Decodable>(mut bytes: Bytes, version: i16) -> T {
    let msg = T::decode(&mut bytes, version).unwrap();
    assert!(
        bytes.is_empty(),
        "kafka-protocol left {} bytes",
        bytes.len()
    );
    msg
}

/// Our spec's key and flexible versions are Kafka's, and Kafka supports our whole range.
pub fn assert_spec_within<Req: Request, Resp: HeaderVersion>(spec: &ApiSpec) {
    assert_eq!(spec.key, Req::KEY);
    assert!(spec.min_version >= Req::VERSIONS.min && spec.max_version <= Req::VERSIONS.max);
    for version in spec.min_version..=spec.max_version {
        let flexible = spec.is_flexible(version);
        assert_eq!(Req::header_version(version) == 2, flexible, "v{version}");
        assert_eq!(Resp::header_version(version) == 1, flexible, "v{version}");
    }
}
