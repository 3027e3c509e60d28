//! Arbitrary bytes into every message decoder a node exposes to the network: request headers,
//! the quorum RPCs (requests and responses, with the node's FetchQuorumRecords extras and broker
//! list), ApiVersions, Produce (v3-10, and the v0-2 refusal path), Fetch, ListOffsets,
//! OffsetForLeaderEpoch, InitProducerId, Metadata and DescribeCluster, requests and responses in
//! every version. They must return errors, never panic, and never allocate beyond what the
//! input can hold. (The frame splitter has its own target, `wire_frame`.)
//!
//! The first byte picks the decoder (low 4 bits) and its version (high 4 bits); the rest is
//! the input.

#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use net::client::ClientRequest;
use net::wire::api::ApiSpec;
use net::wire::kafka::{
    ApiVersionsRequest, ApiVersionsResponse, DescribeClusterRequest, DescribeClusterResponse,
    FetchRequest, FetchResponse, InitProducerIdRequest, InitProducerIdResponse,
    LegacyProduceRequest, ListOffsetsRequest, ListOffsetsResponse, MetadataRequest,
    MetadataResponse, OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, ProduceRequest,
    ProduceResponse, PRODUCE_MIN_ACCEPTED, PRODUCE_SPEC,
};
use net::wire::{api, quorum, RequestHeader, WireReader};

const QUORUM_KEYS: [i16; 7] = [
    api::VOTE,
    api::BEGIN_QUORUM_EPOCH,
    api::END_QUORUM_EPOCH,
    api::DESCRIBE_QUORUM,
    api::FETCH_QUORUM_RECORDS,
    api::FIND_QUORUM,
    api::ALTER_QUORUM,
];

/// The spec of a quorum RPC, AlterQuorum included.
fn quorum_spec(key: i16) -> &'static ApiSpec {
    if key == api::ALTER_QUORUM {
        &api::ALTER_QUORUM_SPEC
    } else {
        api::quorum_api(key).expect("a quorum RPC")
    }
}

/// A version of `spec` picked by `pick`, covering the whole range.
fn version(spec: &ApiSpec, pick: u8) -> i16 {
    let span = (spec.max_version - spec.min_version + 1) as u8;
    spec.min_version + i16::from(pick % span)
}

fn reader(input: &Bytes) -> WireReader {
    WireReader::new(input.clone())
}

/// A message decoder run for its errors and panics only: what it decodes is dropped.
trait Decode {
    fn decode_and_drop(r: &mut WireReader, version: i16);
}

macro_rules! decode_and_drop {
    ($($message:ty),*) => {$(
        impl Decode for $message {
            fn decode_and_drop(r: &mut WireReader, version: i16) {
                let _ = <$message>::decode(r, version);
            }
        }
    )*};
}

decode_and_drop!(
    ApiVersionsRequest,
    ApiVersionsResponse,
    FetchRequest,
    FetchResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    MetadataRequest,
    MetadataResponse,
    DescribeClusterRequest,
    DescribeClusterResponse
);

/// `input` into the decoders of request `Q` and of its response, at the version of its API
/// that `pick` chooses.
fn request_and_response<Q>(pick: u8, input: &Bytes)
where
    Q: ClientRequest + Decode,
    Q::Response: Decode,
{
    let version = version(Q::SPEC, pick);
    Q::decode_and_drop(&mut reader(input), version);
    Q::Response::decode_and_drop(&mut reader(input), version);
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let input = Bytes::copy_from_slice(rest);
    let pick = mode >> 4;
    match mode % 16 {
        1 => {
            // Every supported version of the key (Vote 0-1, the others 0).
            let key = QUORUM_KEYS[usize::from(pick) % QUORUM_KEYS.len()];
            let spec = quorum_spec(key);
            let version = version(spec, pick / 8);
            let _ = quorum::decode_request_with(key, version, &mut WireReader::new(input));
        }
        2 => {
            let key = QUORUM_KEYS[usize::from(pick) % QUORUM_KEYS.len()];
            let _ = quorum::decode_response_with(key, &mut WireReader::new(input));
        }
        3 => {
            // Every advertised version: v0-2 go to the refusal decoder, as the node routes them.
            let version = version(&PRODUCE_SPEC, pick);
            if version < PRODUCE_MIN_ACCEPTED {
                if let Ok(request) = LegacyProduceRequest::decode(&mut reader(&input), version) {
                    let _ = request.refusal();
                }
            }
            let _ = ProduceRequest::decode(&mut reader(&input), version);
            let _ = ProduceResponse::decode(&mut reader(&input), version);
        }
        4 => request_and_response::<ApiVersionsRequest>(pick, &input),
        5 => request_and_response::<FetchRequest>(pick, &input),
        6 => request_and_response::<ListOffsetsRequest>(pick, &input),
        7 => request_and_response::<OffsetForLeaderEpochRequest>(pick, &input),
        8 => request_and_response::<InitProducerIdRequest>(pick, &input),
        9 => request_and_response::<MetadataRequest>(pick, &input),
        10 => request_and_response::<DescribeClusterRequest>(pick, &input),
        _ => {
            let flexible = mode & 0x80 != 0;
            let _ = RequestHeader::read(&mut WireReader::new(input), flexible);
        }
    }
});
