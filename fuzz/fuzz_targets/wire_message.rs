//! Arbitrary bytes into every message decoder a node exposes to the network: request headers,
//! the quorum RPCs (requests and responses, with the node's FetchQuorumRecords extras and broker
//! list), ApiVersions, Produce (v3-10, and the v0-2 refusal path), Fetch, ListOffsets,
//! OffsetForLeaderEpoch, InitProducerId, Metadata, DescribeCluster and the consumer-group APIs
//! (FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch,
//! ListGroups, DescribeGroups, DeleteGroups, OffsetDelete),
//! requests and responses in every version. They must return errors, never panic, and never allocate beyond what the
//! input can hold. (The frame splitter has its own target, `wire_frame`.)
//!
//! The first byte picks the decoder (low 4 bits) and its version (high 4 bits); the rest is
//! the input (for the group APIs, mode 11, the next byte picks the API and its version).

#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use net::client::ClientRequest;
use net::wire::api::ApiSpec;
use net::wire::kafka::{
    DeleteGroupsRequest, DescribeGroupsRequest, ListGroupsRequest, OffsetDeleteRequest,
};
use net::wire::kafka::{
    visit_produce_partitions, ApiVersionsRequest, DescribeClusterRequest, FetchRequest,
    FindCoordinatorRequest, HeartbeatRequest, InitProducerIdRequest, JoinGroupRequest,
    LeaveGroupRequest, LegacyProduceRequest, ListOffsetsRequest, MetadataRequest,
    OffsetCommitRequest, OffsetFetchRequest, OffsetForLeaderEpochRequest, ProduceHead,
    ProduceRequest, ProduceResponse, SyncGroupRequest, PRODUCE_MIN_ACCEPTED, PRODUCE_SPEC,
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

/// `input` into `decode`, a request decoder, and into the decoder of its response, at a version
/// of the request's API that `pick` chooses.
fn request_and_response<Q: ClientRequest, E>(
    pick: u8,
    input: &Bytes,
    decode: fn(&mut WireReader, i16) -> Result<Q, E>,
) {
    let version = version(Q::SPEC, pick);
    let _ = decode(&mut reader(input), version);
    let _ = Q::decode_answer(&mut reader(input), version);
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
            let decoded = ProduceRequest::decode(&mut reader(&input), version);
            // The node's path (head, then each partition visited) reads what decode reads.
            let mut r = reader(&input);
            let mut visited = Vec::new();
            let read = ProduceHead::decode(&mut r, version).and_then(|_| {
                visit_produce_partitions(&mut r, version, |topic, p| {
                    visited.push((topic.to_string(), p))
                })
            });
            match decoded {
                Ok(request) => {
                    assert!(read.is_ok(), "decode read what the visit refused");
                    let flat: Vec<_> = request
                        .topics
                        .into_iter()
                        .flat_map(|t| {
                            let name = t.name;
                            t.partitions.into_iter().map(move |p| (name.clone(), p))
                        })
                        .collect();
                    assert_eq!(visited, flat);
                }
                Err(_) => assert!(read.is_err(), "the visit read what decode refused"),
            }
            let _ = ProduceResponse::decode(&mut reader(&input), version);
        }
        4 => request_and_response(pick, &input, ApiVersionsRequest::decode),
        5 => request_and_response(pick, &input, FetchRequest::decode),
        6 => request_and_response(pick, &input, ListOffsetsRequest::decode),
        7 => request_and_response(pick, &input, OffsetForLeaderEpochRequest::decode),
        8 => request_and_response(pick, &input, InitProducerIdRequest::decode),
        9 => request_and_response(pick, &input, MetadataRequest::decode),
        10 => request_and_response(pick, &input, DescribeClusterRequest::decode),
        11 => {
            let Some((&which, rest)) = input.split_first() else {
                return;
            };
            let (input, pick) = (Bytes::copy_from_slice(rest), which / 11);
            match which % 11 {
                0 => request_and_response(pick, &input, FindCoordinatorRequest::decode),
                1 => request_and_response(pick, &input, JoinGroupRequest::decode),
                2 => request_and_response(pick, &input, SyncGroupRequest::decode),
                3 => request_and_response(pick, &input, HeartbeatRequest::decode),
                4 => request_and_response(pick, &input, LeaveGroupRequest::decode),
                5 => request_and_response(pick, &input, OffsetCommitRequest::decode),
                6 => request_and_response(pick, &input, OffsetFetchRequest::decode),
                7 => request_and_response(pick, &input, ListGroupsRequest::decode),
                8 => request_and_response(pick, &input, DescribeGroupsRequest::decode),
                9 => request_and_response(pick, &input, DeleteGroupsRequest::decode),
                _ => request_and_response(pick, &input, OffsetDeleteRequest::decode),
            }
        }
        _ => {
            let flexible = mode & 0x80 != 0;
            let _ = RequestHeader::read(&mut WireReader::new(input), flexible);
        }
    }
});
