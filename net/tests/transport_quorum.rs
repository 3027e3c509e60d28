//! The transport carrying the real quorum codecs: a follower's FetchQuorumRecords request and
//! the leader's response, whose record batches go out as the log's own buffers (the chain from
//! `wire::quorum::encode_response`), between two loops driven by one thread.

mod transport_support;

use std::time::{Duration, Instant};

use bytes::Bytes;
use engine::raft::{
    Batch, ErrorCode, FetchQuorumRecordsRequest, FetchQuorumRecordsResponse, Request, Response,
};
use engine::record::{BatchView, RecordBatchBuilder};
use net::transport::{Config, ConnId, Event, EventLoop};
use net::wire::frame::size_prefix;
use net::wire::quorum::{decode_request, decode_response, encode_request, encode_response};
use net::wire::{api, RequestHeader, ResponseHeader, WireReader, WireWriter};
use transport_support::{loopback, PATIENCE};

fn batch(base: i64, epoch: i32, records: usize) -> Batch {
    let mut b = RecordBatchBuilder::new(base, epoch);
    for i in 0..records {
        b.append(0, None, Some(format!("value {base}/{i}").as_bytes()), &[]);
    }
    BatchView::parse(b.build().freeze())
        .unwrap()
        .to_raft_batch()
}

/// Prefix the chain with its size: the frame as the transport sends it.
fn framed(mut chain: Vec<Bytes>) -> Vec<Bytes> {
    let len = chain.iter().map(Bytes::len).sum();
    chain.insert(0, Bytes::copy_from_slice(&size_prefix(len)));
    chain
}

/// Poll both loops (one thread, two rings) until `want` says the follower's events suffice.
fn pump(
    leader: &mut EventLoop,
    follower: &mut EventLoop,
    leader_events: &mut Vec<Event>,
    follower_events: &mut Vec<Event>,
    want: impl Fn(&[Event], &[Event]) -> bool,
) {
    let started = Instant::now();
    while !want(leader_events, follower_events) {
        assert!(started.elapsed() < PATIENCE, "gave up");
        leader
            .poll(Some(Duration::from_millis(1)), leader_events)
            .unwrap();
        follower
            .poll(Some(Duration::from_millis(1)), follower_events)
            .unwrap();
    }
}

#[test]
fn a_fetch_response_chain_crosses_the_wire_and_decodes() {
    let mut leader = EventLoop::new(Config::default()).unwrap();
    let mut follower = EventLoop::new(Config::default()).unwrap();
    let listener = leader.listen(loopback()).unwrap();
    let to_leader = follower
        .connect(leader.local_addr(listener).unwrap())
        .unwrap();

    // Follower -> leader: request header v2 + FetchQuorumRecords v0.
    let request = Request::FetchQuorumRecords(FetchQuorumRecordsRequest {
        cluster_id: "cluster".into(),
        replica_id: 2,
        leader_epoch: 3,
        fetch_offset: 0,
        last_fetched_epoch: 0,
        is_follower: true,
        max_wait_ms: 500,
        durable_offset: -1,
        replica_directory_id: Default::default(),
        lease_echo: None,
    });
    let mut w = WireWriter::new();
    RequestHeader {
        api_key: api::FETCH_QUORUM_RECORDS,
        api_version: 0,
        correlation_id: 77,
        client_id: Some("follower-2".into()),
    }
    .write(&mut w, true);
    encode_request(&request, &mut w);
    follower
        .send(to_leader, framed(vec![w.into_inner().freeze()]))
        .unwrap();

    let (mut leader_events, mut follower_events) = (Vec::new(), Vec::new());
    pump(
        &mut leader,
        &mut follower,
        &mut leader_events,
        &mut follower_events,
        |l, _| l.iter().any(|e| matches!(e, Event::Frame { .. })),
    );
    let (from_follower, frame): (ConnId, Bytes) = leader_events
        .iter()
        .find_map(|e| match e {
            Event::Frame { conn, bytes } => Some((*conn, bytes.clone())),
            _ => None,
        })
        .unwrap();
    let mut r = WireReader::new(frame);
    let header = RequestHeader::read(&mut r, true).unwrap();
    assert_eq!(header.correlation_id, 77);
    assert_eq!(
        decode_request(header.api_key, header.api_version, &mut r).unwrap(),
        request
    );

    // Leader -> follower: 300 batches, each its own piece of the chain.
    let batches: Vec<Batch> = (0..300).map(|i| batch(i * 4, 3, 4)).collect();
    let response = Response::FetchQuorumRecords(FetchQuorumRecordsResponse {
        error: ErrorCode::NONE,
        leader_id: 1,
        leader_epoch: 3,
        next_fetch_offset: -1,
        next_fetch_offset_epoch: -1,
        batches: batches.clone(),
        high_watermark: 1200,
        first_dirty_offset: -1,
        last_caught_up_time_ms: -1,
        log_start: None,
        producer_state: None,
        lease_stamp: None,
    });
    // Four responses back to back: 4 x 303 pieces, more than one sendmsg's 1024 iovecs.
    for correlation_id in 77..81 {
        let mut w = WireWriter::new();
        ResponseHeader { correlation_id }.write(&mut w, true);
        let chain = encode_response(&response, w);
        assert_eq!(
            chain[1].as_ptr(),
            batches[0].bytes.as_ptr(),
            "zero-copy chain"
        );
        leader.send(from_follower, framed(chain)).unwrap();
    }
    pump(
        &mut leader,
        &mut follower,
        &mut leader_events,
        &mut follower_events,
        |_, f| {
            f.iter()
                .filter(|e| matches!(e, Event::Frame { .. }))
                .count()
                == 4
        },
    );
    let mut correlation_ids = Vec::new();
    for event in &follower_events {
        if let Event::Frame { conn, bytes } = event {
            assert_eq!(*conn, to_leader);
            let mut r = WireReader::new(bytes.clone());
            correlation_ids.push(ResponseHeader::read(&mut r, true).unwrap().correlation_id);
            assert_eq!(
                decode_response(api::FETCH_QUORUM_RECORDS, &mut r).unwrap(),
                response
            );
        }
    }
    assert_eq!(correlation_ids, vec![77, 78, 79, 80], "responses in order");
    assert!(leader.stats().bytes_sent > 0);
}
