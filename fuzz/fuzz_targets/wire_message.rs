//! Arbitrary bytes into every message decoder a node exposes to the network: request headers,
//! the quorum RPCs (requests and responses, with the node's FetchQuorumRecords extras and broker
//! list), ApiVersions, Produce, Metadata and DescribeCluster. They must return errors,
//! never panic, and never allocate beyond what the input can hold. (The frame splitter has its
//! own target, `wire_frame`.)
//!
//! The first byte picks the decoder and its version; the rest is the input.

#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use net::wire::kafka::{
    ApiVersionsRequest, ApiVersionsResponse, DescribeClusterRequest, DescribeClusterResponse,
    MetadataRequest, MetadataResponse, ProduceRequest, ProduceResponse,
};
use net::wire::{api, quorum, RequestHeader, WireReader};

const QUORUM_KEYS: [i16; 6] = [
    api::VOTE,
    api::BEGIN_QUORUM_EPOCH,
    api::END_QUORUM_EPOCH,
    api::DESCRIBE_QUORUM,
    api::FETCH_QUORUM_RECORDS,
    api::FIND_QUORUM,
];

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let input = Bytes::copy_from_slice(rest);
    match mode % 8 {
        1 => {
            let key = QUORUM_KEYS[usize::from(mode >> 3) % QUORUM_KEYS.len()];
            let _ = quorum::decode_request_with(key, &mut WireReader::new(input));
        }
        2 => {
            let key = QUORUM_KEYS[usize::from(mode >> 3) % QUORUM_KEYS.len()];
            let _ = quorum::decode_response_with(key, &mut WireReader::new(input));
        }
        3 => {
            let version = 3 + i16::from(mode >> 3) % 7;
            let _ = ProduceRequest::decode(&mut WireReader::new(input.clone()), version);
            let _ = ProduceResponse::decode(&mut WireReader::new(input), version);
        }
        4 => {
            let version = i16::from(mode >> 3) % 5;
            let _ = ApiVersionsRequest::decode(&mut WireReader::new(input.clone()), version);
            let _ = ApiVersionsResponse::decode(&mut WireReader::new(input), version);
        }
        5 => {
            let version = i16::from(mode >> 3) % 13;
            let _ = MetadataRequest::decode(&mut WireReader::new(input.clone()), version);
            let _ = MetadataResponse::decode(&mut WireReader::new(input), version);
        }
        6 => {
            let version = i16::from(mode >> 3) % 2;
            let _ = DescribeClusterRequest::decode(&mut WireReader::new(input.clone()), version);
            let _ = DescribeClusterResponse::decode(&mut WireReader::new(input), version);
        }
        _ => {
            let flexible = mode & 0x80 != 0;
            let _ = RequestHeader::read(&mut WireReader::new(input), flexible);
        }
    }
});
