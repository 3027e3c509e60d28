//! Shared by the wire oracle tests: our encoders' bytes, the `kafka-protocol` crate's bytes
//! (the independent codec every Kafka API is checked against), a decoder of theirs that must
//! consume everything, the check of one message both ways against Kafka's
//! ([`assert_same_as_kafka`]), and the check that a spec's key and header versions are Kafka's.
#![allow(dead_code)]

use std::any::type_name;
use std::fmt::Debug;
use std::ops::RangeInclusive;

use bytes::{Bytes, BytesMut};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request};
use net::wire::api::ApiSpec;
use net::wire::kafka::*;
use net::wire::{WireReader, WireWriter};

pub fn ours(f: impl FnOnce(&mut WireWriter)) -> Bytes {
    WireWriter::bytes_of(f)
}

pub use net::wire::frame::joined;

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

/// One of our messages, as the oracle checks handle it.
pub trait OurMessage: Clone + Debug + PartialEq {
    /// Our bytes at `version`, as the peer receives them.
    fn encode_at(&self, version: i16) -> Bytes;
    /// Our decoder's value for `bytes` at `version`; an error fails the test.
    fn decode_at(bytes: Bytes, version: i16) -> Self;
    /// What our decoder gives back for this message's bytes: the message itself, unless the
    /// codec reshapes it (a fetch response's records arrive as one piece).
    fn as_received(&self) -> Self {
        self.clone()
    }
}

/// Our messages encoded with `encode(&self, &mut WireWriter, version)` and decoded with
/// `decode(&mut WireReader, version) -> Result<Self, _>`.
macro_rules! our_messages {
    ($($message:ty),* $(,)?) => {$(
        impl OurMessage for $message {
            fn encode_at(&self, version: i16) -> Bytes {
                ours(|w| self.encode(w, version))
            }

            fn decode_at(bytes: Bytes, version: i16) -> Self {
                <$message>::decode(&mut WireReader::new(bytes), version).unwrap_or_else(|e| {
                    panic!("{} v{version}: {e:?}", stringify!($message))
                })
            }
        }
    )*};
}

our_messages!(
    ApiVersionsRequest,
    ApiVersionsResponse,
    ProduceRequest,
    ProduceResponse,
    FetchRequest,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    MetadataRequest,
    MetadataResponse,
    DescribeClusterRequest,
    DescribeClusterResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    SyncGroupRequest,
    SyncGroupResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
);

/// A fetch response goes out as a chain whose record pieces are the log's own buffers.
impl OurMessage for FetchResponse {
    fn encode_at(&self, version: i16) -> Bytes {
        joined(&self.encode_chain(WireWriter::new(), version))
    }

    fn decode_at(bytes: Bytes, version: i16) -> Self {
        FetchResponse::decode(&mut WireReader::new(bytes), version)
            .unwrap_or_else(|e| panic!("FetchResponse v{version}: {e:?}"))
    }

    /// Each partition's records as the one piece received.
    fn as_received(&self) -> Self {
        let mut r = self.clone();
        for p in r.topics.iter_mut().flat_map(|t| t.partitions.iter_mut()) {
            p.records = p
                .records_bytes()
                .map(|b| if b.is_empty() { Vec::new() } else { vec![b] });
        }
        r
    }
}

/// One message at `version`, both ways, byte for byte: our bytes are Kafka's; Kafka's bytes
/// decode here to our message (as our decoder gives it back); our bytes decode there, leaving
/// nothing, to Kafka's message.
pub fn assert_same_as_kafka<O, K>(message: &O, kafka: &K, version: i16)
where
    O: OurMessage,
    K: Encodable + Decodable + PartialEq + Debug,
{
    let what = type_name::<O>().rsplit("::").next().unwrap_or("message");
    let kafka_bytes = theirs(kafka, version);
    let our_bytes = message.encode_at(version);
    assert_eq!(our_bytes, kafka_bytes, "{what} v{version}: our bytes");
    assert_eq!(
        O::decode_at(kafka_bytes, version),
        message.as_received(),
        "{what} v{version}: Kafka's bytes decoded by us"
    );
    assert_eq!(
        &decode_theirs::<K>(our_bytes, version),
        kafka,
        "{what} v{version}: our bytes decoded by Kafka"
    );
}

/// [`assert_same_as_kafka`] in every version of `versions`, for each pair (ours, Kafka's) that
/// `cases` gives at that version; a version without a case fails.
pub fn assert_same_as_kafka_in<O, K>(
    versions: RangeInclusive<i16>,
    mut cases: impl FnMut(i16) -> Vec<(O, K)>,
) where
    O: OurMessage,
    K: Encodable + Decodable + PartialEq + Debug,
{
    assert!(!versions.is_empty(), "no versions");
    for version in versions {
        let pairs = cases(version);
        assert!(!pairs.is_empty(), "v{version}: no cases");
        for (message, kafka) in &pairs {
            assert_same_as_kafka(message, kafka, version);
        }
    }
}

/// [`assert_same_as_kafka_in`] every version `spec` serves, with one case a version: the
/// message `message` makes at it and Kafka's that `kafka` makes from that.
pub fn assert_each_version_same_as_kafka<O, K>(
    spec: &ApiSpec,
    mut message: impl FnMut(i16) -> O,
    kafka: impl Fn(&O) -> K,
) where
    O: OurMessage,
    K: Encodable + Decodable + PartialEq + Debug,
{
    assert_same_as_kafka_in(versions(spec), |version| {
        vec![paired(message(version), &kafka)]
    });
}

/// Every version `spec` serves.
pub fn versions(spec: &ApiSpec) -> RangeInclusive<i16> {
    spec.min_version..=spec.max_version
}

/// Our message and Kafka's made from it.
pub fn paired<O, K>(message: O, kafka: impl FnOnce(&O) -> K) -> (O, K) {
    let kafka = kafka(&message);
    (message, kafka)
}
